package sandbox

// procfs.go reads /proc: a process's stat line and real uid, and the processes of a uid.

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

type procInfo struct {
	pid, ppid int
	state     byte   // R, S, D, Z (zombie), ...
	start     uint64 // clock ticks after boot
}

// parseStat reads pid, ppid and start time from a /proc/<pid>/stat line.
func parseStat(s string) (procInfo, bool) {
	var p procInfo
	i := strings.IndexByte(s, ' ')
	j := strings.LastIndexByte(s, ')')
	if i < 0 || j < 0 {
		return p, false
	}
	p.pid, _ = strconv.Atoi(s[:i])
	f := strings.Fields(s[j+1:])
	if len(f) < 20 {
		return p, false
	}
	p.state = f[0][0]
	p.ppid, _ = strconv.Atoi(f[1])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, true
}

func scanProcs() []procInfo {
	entries, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseStat(string(b)); ok {
			out = append(out, p)
		}
	}
	return out
}

// procStat reads /proc/<pid>/stat (ok false when gone).
func procStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(string(b))
}

// procUID is the real uid of pid (-1 when gone).
func procUID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return -1
}

// pidsOfUID scans /proc for the processes whose real uid is uid.
func pidsOfUID(uid int) []int {
	return pidsByUID(func(u int) bool { return u == uid })[uid]
}

// pidsByUID scans /proc once for the processes whose real uid is one of want's, by uid.
func pidsByUID(want func(uid int) bool) map[int][]int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		// /proc/<pid> is owned by the process's effective uid; confirm with the real uid.
		if unix.Stat("/proc/"+e.Name(), &st) != nil || !want(int(st.Uid)) {
			continue
		}
		if uid := procUID(pid); want(uid) {
			out[uid] = append(out[uid], pid)
		}
	}
	return out
}

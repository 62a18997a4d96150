package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memAvailable is the host's MemAvailable (/proc/meminfo), in bytes.
func memAvailable() int64 { return meminfo("MemAvailable") }

// meminfo is one field of /proc/meminfo, in bytes (0 when unreadable).
func meminfo(field string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == field {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// smapsRollup is pid's /proc/PID/smaps_rollup, each field in bytes.
func smapsRollup(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.HasSuffix(v, " kB") {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, " kB")), 10, 64)
			out[k] = n << 10
		}
	}
	return out, nil
}

// descendantKernels are the ipykernel processes below this process (sandboxed ones run under
// bubblewrap, forked ones under a template).
func descendantKernels() []int {
	self := os.Getpid()
	parent := map[int]int{}
	var kernels []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		parent[pid], _ = strconv.Atoi(f[1])
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if string(bytes.TrimSpace(comm)) == "bwrap" {
			continue // a sandbox's wrapper: its argv names the kernel too
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmd, []byte("ipykernel")) {
			kernels = append(kernels, pid)
		}
	}
	var out []int
	for _, k := range kernels {
		for p, hops := parent[k], 0; p > 1 && hops < 16; p, hops = parent[p], hops+1 {
			if p == self {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

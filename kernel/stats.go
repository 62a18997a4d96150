package kernel

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ProcStats are resource figures of a kernel, used for budgets.
type ProcStats struct {
	CPUSeconds float64 // user+sys of every live process in the kernel's group, plus their reaped children
	RSSBytes   int64   // resident memory summed over the kernel's process group
}

// clockTicks is USER_HZ, 100 on every Linux ABI Go supports.
const clockTicks = 100

var pageSize = int64(os.Getpagesize())

// Stats asks the current process's provisioner: for a local kernel, GroupStats of its process group.
func (k *Kernel) Stats() (ProcStats, error) {
	inst := k.current()
	if exited(inst.proc) {
		return ProcStats{}, fmt.Errorf("kernel %s: stats: %w", k.id, inst.deadErrOr(ErrDied))
	}
	return inst.proc.Stats()
}

// deadErrOr returns the death reason, or fallback when there is none yet.
func (inst *instance) deadErrOr(fallback error) error {
	if err := inst.deadErr(); err != nil {
		return err
	}
	return fallback
}

// GroupStats reads /proc: for each live process in the process group pgid, utime+stime+cutime+cstime
// (so the leader, what it is running now, and what it ran and reaped) and RSS. A child reaped by the
// leader moves from its own line into the leader's cutime, so nothing is counted twice. Children that
// left the group (setsid) are not counted.
func GroupStats(pgid int) (ProcStats, error) {
	var st ProcStats
	// The leader first: if it is gone, the figures are meaningless.
	leader, err := readStat(pgid)
	if err != nil {
		return st, fmt.Errorf("stats of pid %d: %w", pgid, err)
	}
	add := func(s procStat) {
		st.CPUSeconds += float64(s.utime+s.stime+s.cutime+s.cstime) / clockTicks
		st.RSSBytes += s.rss * pageSize
	}
	add(leader)
	d, err := os.Open("/proc")
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == pgid {
			continue
		}
		s, err := readStat(pid)
		if err != nil || s.pgrp != pgid {
			continue // gone meanwhile, or another group
		}
		add(s)
	}
	return st, nil
}

type procStat struct {
	pgrp                         int
	utime, stime, cutime, cstime int64
	rss                          int64 // pages
}

// readStat parses /proc/<pid>/stat. The command name (field 2) may hold spaces and parentheses, so
// fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	var s procStat
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return s, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	num := func(field int) int64 {
		v, _ := strconv.ParseInt(string(f[field-3]), 10, 64)
		return v
	}
	s.pgrp = int(num(5))
	s.utime, s.stime, s.cutime, s.cstime = num(14), num(15), num(16), num(17)
	s.rss = num(24)
	return s, nil
}

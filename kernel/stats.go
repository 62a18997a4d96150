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
	// ShmemBytes is the part of RSSBytes that is shared memory (RssShmem: memfd, tmpfs and
	// MAP_SHARED anonymous pages). A fork's children map the node's shared copy of a large buffer
	// (persistence.SharedBuffers) this way, so each child's RSS holds the whole copy; the memory
	// watch counts that copy once (server/capacity.Charged), not once per child.
	ShmemBytes int64
	// OwnBytes, when above 0, is what the kernel's memory costs the node on its own, where RSS says
	// far more: a kernel forked from a template into a box maps the template's pages (~110 MiB of a
	// data-science session's ~130 MiB RSS) but is charged, in its box's memory cgroup, only for the
	// pages it wrote or loaded itself (the shared ones are the template's cgroup's). The memory
	// watch counts this (server/capacity.Resident); 0: not known, RSSBytes is the cost.
	OwnBytes int64
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
// left the group (setsid) are not counted. Without the leader the figures are meaningless: an error.
// The members are found through the node's shared map of groups (procgroups.go), their figures
// read fresh.
func GroupStats(pgid int) (ProcStats, error) { return groups.stats(pgid) }

// ProcTable is one pass over /proc: the stat line of every live process, by pid. A caller needing
// several groups' figures (a sandbox: the wrapper's group and the box's) reads /proc once, not once
// per group: every turn's cost sample reads the whole table, so it is O(processes on the host).
type ProcTable map[int]procStat

// ScanProcs reads the stat line of every live process.
func ScanProcs() (ProcTable, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	t := make(ProcTable, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if s, err := readStat(pid); err == nil { // else gone meanwhile
			t[pid] = s
		}
	}
	return t, nil
}

// ReadProcs reads the stat lines of pids (those gone meanwhile are left out).
func ReadProcs(pids []int) ProcTable {
	t := make(ProcTable, len(pids))
	for _, pid := range pids {
		if s, err := readStat(pid); err == nil {
			t[pid] = s
		}
	}
	return t
}

// Group sums the leader pgid and the other processes of its group; an error when the leader is not
// in the table.
func (t ProcTable) Group(pgid int) (ProcStats, error) {
	var st ProcStats
	leader, ok := t[pgid]
	if !ok {
		return st, fmt.Errorf("stats of pid %d: gone", pgid)
	}
	add := func(pid int, s procStat) {
		st.CPUSeconds += float64(s.utime+s.stime+s.cutime+s.cstime) / clockTicks
		st.RSSBytes += s.rss * pageSize
		st.ShmemBytes += rssShmem(pid)
	}
	add(pgid, leader)
	for pid, s := range t {
		if pid != pgid && s.pgrp == pgid {
			add(pid, s)
		}
	}
	return st, nil
}

// rssShmem is /proc/PID/status's RssShmem in bytes (0 when the process is gone or the line absent).
// It is a counter the kernel keeps, so reading it costs a file read, not a walk of the page tables
// (smaps_rollup's PSS took ~95 ms per GiB mapped here: too dear for a sample every second).
func rssShmem(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	_, rest, ok := bytes.Cut(b, []byte("\nRssShmem:"))
	if !ok {
		return 0
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(line), []byte(" kB"))), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}

// Children lists the pids whose parent is pid.
func (t ProcTable) Children(pid int) []int {
	var out []int
	for p, s := range t {
		if s.ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

type procStat struct {
	state                        byte // R running, S sleeping, D uninterruptible (or frozen), T stopped, Z zombie, ...
	ppid, pgrp                   int
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
	s.state = f[0][0]
	s.ppid, s.pgrp = int(num(4)), int(num(5))
	s.utime, s.stime, s.cutime, s.cstime = num(14), num(15), num(16), num(17)
	s.rss = num(24)
	return s, nil
}

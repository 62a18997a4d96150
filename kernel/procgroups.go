package kernel

import (
	"sync"
	"time"
)

// groups is the node's map of process groups to their members, shared by every cost sample of
// this process. A node samples each live session about once a second, and reading all of /proc per
// sample made a second of sampling O(sessions x processes on the host); with the map, /proc is
// read whole at most once a second and each sample re-reads only its own group's stat lines.
var groups = groupScan{every: time.Second}

// groupScan remembers which processes each process group held at its last full read of /proc. A
// process that joined a group since then is counted from the next full read (at most every later):
// its CPU times are cumulative, and a child reaped meanwhile is in its parent's cutime, so nothing
// is lost, only counted up to a second late. A leader missing from the map (a kernel just started)
// is looked for at once.
type groupScan struct {
	every time.Duration

	mu      sync.Mutex
	at      time.Time
	members map[int][]int // pgid -> pids, from the last full read
	reads   int           // full reads of /proc so far (tests)
}

// pids lists the members of group pgid as the map knows them, reading /proc whole first when the
// map is older than every or does not hold pgid.
func (g *groupScan) pids(pgid int) ([]int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[pgid]; ok && time.Since(g.at) < g.every {
		return m, nil
	}
	t, err := ScanProcs()
	if err != nil {
		return nil, err
	}
	g.members = make(map[int][]int)
	for pid, s := range t {
		g.members[s.pgrp] = append(g.members[s.pgrp], pid)
	}
	g.at = time.Now()
	g.reads++
	return g.members[pgid], nil
}

// stats is GroupStats through g: fresh figures of the members g knows.
func (g *groupScan) stats(pgid int) (ProcStats, error) {
	pids, err := g.pids(pgid)
	if err != nil {
		return ProcStats{}, err
	}
	return ReadProcs(pids).Group(pgid)
}

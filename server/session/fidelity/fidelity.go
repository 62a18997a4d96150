// Package fidelity keeps what a session's next answer must tell of what was not carried over: the
// background processes a kernel took with it when it stopped or died, and the report of the last
// restore (what came back, what was rebuilt, what was lost). Nothing a user had vanishes silently:
// it is named in the next run's answer (processes_ended, restore).
package fidelity

import (
	"sync"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// Notes are one session's notes for its next answer. The zero value is empty.
type Notes struct {
	mu       sync.Mutex
	ended    []kernel.BackgroundProcess // ended with a kernel stopped or dead; told in the next run's answer
	restored *carryover.RestoreReport   // the last restore's report; told in the next run's answer
	// bgSeen is the background processes of bgKernel at the last cost sample: what a kernel's death
	// takes with it, when they are gone before the death is noticed (a box dies with its kernel).
	bgSeen   []kernel.BackgroundProcess
	bgKernel *kernel.Kernel
}

// Ended keeps procs, background processes that ended with a kernel, for the next run's answer.
func (n *Notes) Ended(procs []kernel.BackgroundProcess) {
	n.mu.Lock()
	n.ended = append(n.ended, procs...)
	n.mu.Unlock()
}

// EndedByDeath is what a dead kernel takes with it: the processes still listed plus those of the
// last cost sample (a box dies with its kernel, so by now some or all may be gone). The sample is at
// most a second older than the last turn; a process that ended on its own since is named as well.
// A listed process caught exiting has lost its command line; the sample's is used for it.
func (n *Notes) EndedByDeath(k *kernel.Kernel) []kernel.BackgroundProcess {
	procs := k.Background()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.bgKernel != k {
		return procs
	}
	sampled := make(map[int]string, len(n.bgSeen))
	for _, s := range n.bgSeen {
		sampled[s.PID] = s.Command
	}
	listed := make(map[int]bool, len(procs))
	for i := range procs {
		listed[procs[i].PID] = true
		if procs[i].Command == "" {
			procs[i].Command = sampled[procs[i].PID]
		}
	}
	for _, s := range n.bgSeen {
		if !listed[s.PID] {
			procs = append(procs, s)
		}
	}
	return procs
}

// Background keeps k's background processes from a cost sample (see EndedByDeath). A nil list
// (the kernel is dying, its box killing the rest) keeps the earlier one: a sample taken as the
// kernel died once replaced what it had with nothing, and its death named no process.
func (n *Notes) Background(k *kernel.Kernel, procs []kernel.BackgroundProcess) {
	if procs == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.bgSeen, n.bgKernel = procs, k
}

// HasBackground says whether the last cost sample saw background processes (eviction spares such
// sessions when it can).
func (n *Notes) HasBackground() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.bgSeen) > 0
}

// TakeEnded hands over (and forgets) what Ended kept.
func (n *Notes) TakeEnded() []kernel.BackgroundProcess {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.ended
	n.ended = nil
	return e
}

// Restored keeps the report of a restore for the next run's answer (TakeRestored), as Ended does
// for the processes a kernel took with it. A later restore replaces it: it replaced the namespace
// the earlier one had made.
func (n *Notes) Restored(res *carryover.RestoreResult) {
	r := res.Report()
	n.mu.Lock()
	n.restored = r
	n.mu.Unlock()
}

// TakeRestored hands over (and forgets) what Restored kept.
func (n *Notes) TakeRestored() *carryover.RestoreReport {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.restored
	n.restored = nil
	return r
}

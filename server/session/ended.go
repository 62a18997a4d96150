package session

import (
	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// noteEnded names procs, the background processes of kernel k that end with it (a server, a
// subprocess.Popen the session started: they cannot survive it), in the event payload as
// processes_ended, and keeps them for the next run's answer, so they never vanish silently.
func (ls *Session) noteEnded(k *kernel.Kernel, procs []kernel.BackgroundProcess, payload map[string]any) {
	s := ls.svc
	if len(procs) == 0 {
		return
	}
	payload["processes_ended"] = procs
	s.log.Info("background processes end with the kernel", "session", ls.id, "kernel", k.ID(), "processes", procs)
	ls.mu.Lock()
	ls.ended = append(ls.ended, procs...)
	ls.mu.Unlock()
}

// endedByDeath is what a dead kernel takes with it: the processes still listed plus those of the
// last cost sample (a box dies with its kernel, so by now some or all may be gone). The sample is at
// most a second older than the last turn; a process that ended on its own since is named as well.
// A listed process caught exiting has lost its command line; the sample's is used for it.
func (ls *Session) endedByDeath(k *kernel.Kernel) []kernel.BackgroundProcess {
	procs := k.Background()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.bgKernel != k {
		return procs
	}
	sampled := make(map[int]string, len(ls.bgSeen))
	for _, s := range ls.bgSeen {
		sampled[s.PID] = s.Command
	}
	listed := make(map[int]bool, len(procs))
	for i := range procs {
		listed[procs[i].PID] = true
		if procs[i].Command == "" {
			procs[i].Command = sampled[procs[i].PID]
		}
	}
	for _, s := range ls.bgSeen {
		if !listed[s.PID] {
			procs = append(procs, s)
		}
	}
	return procs
}

// noteBackground keeps k's background processes from a cost sample (see endedByDeath). A nil list
// (the kernel is dying, its box killing the rest) keeps the earlier one: a sample taken as the
// kernel died once replaced what it had with nothing, and its death named no process.
func (ls *Session) noteBackground(k *kernel.Kernel, procs []kernel.BackgroundProcess) {
	if procs == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.bgSeen, ls.bgKernel = procs, k
}

// takeEnded hands over (and forgets) what noteEnded kept.
func (ls *Session) takeEnded() []kernel.BackgroundProcess {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.ended
	ls.ended = nil
	return e
}

// noteRestored keeps the report of a restore for the next run's answer (takeRestored), as noteEnded
// does for the processes a kernel took with it. A later restore replaces it: it replaced the
// namespace the earlier one had made.
func (ls *Session) noteRestored(res *carryover.RestoreResult) {
	r := res.Report()
	ls.mu.Lock()
	ls.restored = r
	ls.mu.Unlock()
}

// takeRestored hands over (and forgets) what noteRestored kept.
func (ls *Session) takeRestored() *carryover.RestoreReport {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	r := ls.restored
	ls.restored = nil
	return r
}

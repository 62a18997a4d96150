package session

import "github.com/carryover/carryover/kernel"

// noteEnded names procs, the background processes of kernel k that end with it (a server, a
// subprocess.Popen the session started: they cannot survive it), in the event payload as
// processes_ended, and keeps them for the next run's answer (package fidelity), so they never
// vanish silently.
func (ls *Session) noteEnded(k *kernel.Kernel, procs []kernel.BackgroundProcess, payload map[string]any) {
	if len(procs) == 0 {
		return
	}
	payload["processes_ended"] = procs
	ls.svc.log.Info("background processes end with the kernel", "session", ls.id, "kernel", k.ID(), "processes", procs)
	ls.notes.Ended(procs)
}

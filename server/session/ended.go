package session

import (
	"github.com/carryover/carryover/kernel"
)

// noteEnded lists the background processes of a kernel about to be stopped on purpose (a server, a
// subprocess.Popen the session started: they cannot survive it), names them in the event payload
// as processes_ended, and keeps them for the next run's answer, so they never vanish silently.
func (s *Service) noteEnded(ls *liveSession, k *kernel.Kernel, payload map[string]any) {
	procs := k.Background()
	if len(procs) == 0 {
		return
	}
	payload["processes_ended"] = procs
	s.log.Info("background processes end with the kernel", "session", ls.id, "kernel", k.ID(), "processes", procs)
	ls.mu.Lock()
	ls.ended = append(ls.ended, procs...)
	ls.mu.Unlock()
}

// takeEnded hands over (and forgets) what noteEnded kept.
func (ls *liveSession) takeEnded() []kernel.BackgroundProcess {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e := ls.ended
	ls.ended = nil
	return e
}

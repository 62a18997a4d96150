package session

import (
	"context"
	"fmt"
	"syscall"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/stream"
)

// Handover gives session id up so that another node serves it, as a draining cluster node does
// (server/cluster, drain.go) while it still answers requests: once no turn runs (it takes its place
// in the session's line of turns), the kernel is checkpointed, the session is marked hibernated in
// the store, dropped from this node and its kernel killed (stopped in the background; Close waits
// for it). A turn queued behind the handover answers not_owner, so its client retries at once and
// reaches the next owner. It reports whether the session was handed over; an error (the checkpoint
// failed) leaves the session here, served as before: a kernel is never stopped unsaved.
func (s *Service) Handover(ctx context.Context, id string) (bool, error) {
	s.mu.Lock()
	ls, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return false, err
	}
	defer ls.lock.Unlock()
	ctx = context.WithoutCancel(ctx) // a checkpoint is never abandoned half-way
	if k := ls.currentKernel(); k != nil {
		// The turn's own checkpoint, when it still holds everything (saved.go), is the one the next
		// owner restores: a second one would cost the client's pause a kernel round trip and a commit.
		if ls.savedAsIs(ctx, k) {
			s.log.Info("handover: the last checkpoint holds the session as it is; none taken", "session", id)
		} else if _, err := ls.checkpoint(ctx, k); err != nil {
			return false, fmt.Errorf("session %q: checkpoint before the handover: %w", id, err)
		}
		ls.sampleCost(ctx, k)
		if err := ls.setSandboxStatus(ctx, carryover.SandboxHibernated); err != nil {
			return false, fmt.Errorf("session %q: handover: %w", id, err)
		}
	}
	s.mu.Lock()
	if s.sessions[id] == ls {
		delete(s.sessions, id)
	}
	s.mu.Unlock()
	s.moved.Add(id) // a request routed here just before: not_owner, not not_found (package moves)
	ls.mu.Lock()
	ls.deleted, ls.evicted = true, true // a turn queued behind this one answers not_owner (admit)
	k := ls.kern
	ls.kern = nil
	ls.mu.Unlock()
	if k != nil {
		k.Process().Signal(syscall.SIGKILL) // saved just now; nothing may run here any more
		s.bg.wg.Add(1)
		go func() {
			defer s.bg.wg.Done()
			now, cancel := context.WithCancel(context.Background())
			cancel() // a done context: no shutdown_request, no grace
			s.stopKernel(now, k)
		}()
	}
	ls.hub.Broadcast(stream.ErrorFrame{Type: "error", Error: carryover.Errorf(carryover.CodeNotOwner,
		"session %q moved to another node; reconnect", id)})
	return true, nil
}

package session

import (
	"context"
	"time"

	"github.com/carryover/carryover"
)

// Rotate replaces the session's kernel: checkpoint -> new kernel (from the pool) -> restore ->
// switch -> old kernel terminated. A run in progress delays it (it waits for the run lock); runs
// arriving meanwhile wait and then run in the new kernel.
func (s *Service) Rotate(ctx context.Context, id string) (carryover.Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return carryover.Session{}, err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	return s.rotateLocked(context.WithoutCancel(ctx), ls, "requested")
}

func (s *Service) rotateLocked(ctx context.Context, ls *liveSession, reason string) (carryover.Session, error) {
	if _, _, err := s.transition(ctx, ls, carryover.StateRotating, nil); err != nil {
		return carryover.Session{}, err
	}
	start := time.Now()
	s.emit(ctx, ls, carryover.EventRotationStarted, map[string]any{"reason": reason})
	fail := func(err error) (carryover.Session, error) {
		s.emit(ctx, ls, carryover.EventRotationFailed, map[string]any{"error": err.Error()})
		// The session stays usable: back to running, with whatever kernel it has (or a fresh one
		// restored from its last checkpoint on the next run).
		doc, _, terr := s.transition(ctx, ls, carryover.StateRunning, nil)
		if terr != nil {
			return doc, terr
		}
		return doc, err
	}
	old := ls.currentKernel()
	if old != nil {
		select {
		case <-old.Dead():
			s.dropDeadKernel(ctx, ls, old)
			old = nil
		default:
			res, err := s.checkpoint(ctx, ls, old)
			if err != nil {
				return fail(err)
			}
			s.emit(ctx, ls, carryover.EventCheckpointCreated, res)
			// Detach the old kernel so ensureKernelWith claims and restores a new one (the old one
			// not counted against the tenant's live_kernels while both live).
			ls.mu.Lock()
			ls.kern = nil
			ls.mu.Unlock()
		}
	}
	if _, err := s.ensureKernelWith(ctx, ls, ensureOpts{replaces: old}); err != nil {
		if old != nil {
			ls.mu.Lock()
			ls.kern = old // keep serving from the old kernel
			ls.mu.Unlock()
		}
		return fail(err)
	}
	if old != nil {
		payload := map[string]any{"sandbox_id": "sbx_" + old.ID(), "reason": "rotation"}
		s.noteEnded(ls, old, old.Background(), payload)
		s.stopKernel(ctx, old)
		s.emit(ctx, ls, carryover.EventSandboxTerminated, payload)
	}
	doc, _, err := s.transition(ctx, ls, carryover.StateRunning, nil)
	if err != nil {
		return doc, err
	}
	s.emit(ctx, ls, carryover.EventRotationCompleted, map[string]any{"duration_ms": ms(time.Since(start))})
	return doc, nil
}

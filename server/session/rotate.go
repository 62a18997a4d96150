package session

import (
	"context"
	"time"

	"github.com/carryover/carryover"
)

// Rotate replaces the session's kernel: checkpoint -> new kernel (from the pool) -> restore ->
// switch -> old kernel terminated. A run in progress delays it (it waits for the run lock); runs
// arriving meanwhile wait and then run in the new kernel.
func (ls *Session) Rotate(ctx context.Context) (carryover.Session, error) {
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	return ls.rotateLocked(context.WithoutCancel(ctx), "requested")
}

func (ls *Session) rotateLocked(ctx context.Context, reason string) (carryover.Session, error) {
	s := ls.svc
	if _, _, err := ls.transition(ctx, carryover.StateRotating, nil); err != nil {
		return carryover.Session{}, err
	}
	start := time.Now()
	ls.emit(ctx, carryover.EventRotationStarted, map[string]any{"reason": reason})
	fail := func(err error) (carryover.Session, error) {
		ls.emit(ctx, carryover.EventRotationFailed, map[string]any{"error": err.Error()})
		// The session stays usable: back to running, with whatever kernel it has (or a fresh one
		// restored from its last checkpoint on the next run).
		doc, _, terr := ls.transition(ctx, carryover.StateRunning, nil)
		if terr != nil {
			return doc, terr
		}
		return doc, err
	}
	old := ls.currentKernel()
	if old != nil {
		select {
		case <-old.Dead():
			ls.dropDeadKernel(ctx, old)
			old = nil
		default:
			res, err := ls.checkpoint(ctx, old)
			if err != nil {
				return fail(err)
			}
			ls.emit(ctx, carryover.EventCheckpointCreated, res)
			// Detach the old kernel so ensureKernelWith claims and restores a new one (the old one
			// not counted against the tenant's live_kernels while both live).
			ls.mu.Lock()
			ls.kern = nil
			ls.mu.Unlock()
		}
	}
	if _, err := ls.ensureKernelWith(ctx, ensureOpts{replaces: old}); err != nil {
		if old != nil {
			ls.mu.Lock()
			ls.kern = old // keep serving from the old kernel
			ls.mu.Unlock()
		}
		return fail(err)
	}
	if old != nil {
		payload := map[string]any{"sandbox_id": "sbx_" + old.ID(), "reason": "rotation"}
		ls.noteEnded(old, old.Background(), payload)
		s.stopKernel(ctx, old)
		ls.emit(ctx, carryover.EventSandboxTerminated, payload)
	}
	doc, _, err := ls.transition(ctx, carryover.StateRunning, nil)
	if err != nil {
		return doc, err
	}
	ls.emit(ctx, carryover.EventRotationCompleted, map[string]any{"duration_ms": ms(time.Since(start))})
	return doc, nil
}

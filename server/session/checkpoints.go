package session

// checkpoints.go: checkpoints on request (take one now, list them, go back to one); the turn's
// own checkpoint is checkpointTurn (run.go) and the engine is persistence.Checkpointer.

import (
	"context"
	"errors"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/cost"
)

// CheckpointNow takes a checkpoint outside a run.
func (ls *Session) CheckpointNow(ctx context.Context) (*carryover.CheckpointResult, error) {
	if err := ls.lock.Lock(ctx); err != nil {
		return nil, err
	}
	defer ls.lock.Unlock()
	k := ls.currentKernel()
	if k == nil {
		return nil, carryover.Errorf(carryover.CodeConflict, "session has no live kernel; its last checkpoint is current").
			WithDetails("last_checkpoint", ls.docCopy().LastCheckpoint)
	}
	res, err := ls.checkpoint(ctx, k)
	if err != nil {
		return nil, err
	}
	ls.emit(ctx, carryover.EventCheckpointCreated, res)
	return res, nil
}

// Checkpoints lists a session's checkpoints, newest first.
func (s *Service) Checkpoints(ctx context.Context, id string) ([]carryover.CheckpointSummary, error) {
	if _, err := s.Session(id); err != nil {
		return nil, err
	}
	cps, err := s.store.ListCheckpoints(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]carryover.CheckpointSummary, 0, len(cps))
	for _, cp := range cps {
		out = append(out, s.ckpt.Summarize(cp))
	}
	return out, nil
}

// RestoreCheckpoint puts the session back to a checkpoint: a fresh kernel, that namespace, those
// files. The session's kernel is replaced only once the new one holds the checkpoint.
func (ls *Session) RestoreCheckpoint(ctx context.Context, cid string) (*carryover.RestoreResult, error) {
	s := ls.svc
	cp, err := checkpointByID(ctx, s.store, ls.id, cid)
	if err != nil {
		return nil, err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return nil, err
	}
	defer ls.lock.Unlock()
	if doc := ls.docCopy(); doc.Closed() || doc.State == carryover.StatePaused {
		return nil, carryover.Errorf(carryover.CodeConflict, "cannot restore a %s session", doc.State)
	}
	if ls.docCopy().State == carryover.StatePending {
		if _, _, err := ls.transition(ctx, carryover.StateRunning, nil); err != nil {
			return nil, err
		}
	}
	// The new kernel is claimed (pool, or a new one for another network setting) and restored
	// before the old one goes, as a rotation does: a refused claim (the tenant's live_kernels, the
	// node's capacity) or a failed restore leaves the session on its kernel, live and answering.
	k, err := s.takeKernel(ctx, kernelClaim{doc: ls.docCopy(), replaces: ls.currentKernel()})
	if err != nil {
		return nil, err
	}
	baseline := cost.Baseline(k)
	doc := ls.docCopy()
	doc.ExecutionCount = cp.Turn
	if err := s.kern.Prepare(ctx, ls.id, k, doc); err != nil {
		s.stopKernel(ctx, k)
		return nil, err
	}
	res, err := s.ckpt.Restore(ctx, k, ls.id, cp.ID, s.cfg.workspace(ls.id), true)
	if err != nil {
		s.stopKernel(ctx, k)
		return nil, err
	}
	ls.releaseKernel(ctx, "checkpoint restore")
	baseline.Settle() // the claim's CPU read before the next cell (cost.Meter.Settle)
	ls.relayComms(k)  // comm_relay.go: the widgets' messages, subscribed before anyone can send a cell
	ls.mu.Lock()
	ls.attachLocked(k, baseline)
	ls.doc.Sandbox.ID = "sbx_" + k.ID()
	ls.doc.Sandbox.Status = carryover.SandboxLive
	ls.mu.Unlock()
	go ls.watchKernel(k)
	ls.notes.Restored(res)
	// The restored state becomes the newest checkpoint, so a later crash comes back to it.
	cpRes, err := ls.checkpoint(ctx, k)
	if err != nil {
		return res, err
	}
	ls.emit(ctx, carryover.EventCheckpointRestored, map[string]any{"checkpoint_id": cp.ID, "turn": cp.Turn, "restore": res, "new_checkpoint_id": cpRes.ID})
	return res, nil
}

// checkpointByID is session id's checkpoint cid, or not_found naming it.
func checkpointByID(ctx context.Context, store carryover.Store, id, cid string) (carryover.Checkpoint, error) {
	cp, err := store.GetCheckpoint(ctx, id, cid)
	if errors.Is(err, carryover.ErrNotFound) {
		return cp, carryover.Errorf(carryover.CodeNotFound, "checkpoint %q not found", cid)
	}
	return cp, err
}

package persistence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/carryover/carryover"
)

// fencedPrune is a store that commits checkpoints as its inner one does, through a writer without
// a pruning commit (as PostgreSQL + S3's), and whose Prune is refused not_owner: a cluster node
// fenced between a checkpoint's commit and the prune after it.
type fencedPrune struct{ carryover.CheckpointStore }

type plainWriter struct{ carryover.CheckpointWriter }

func (f fencedPrune) BeginCheckpoint(ctx context.Context) (carryover.CheckpointWriter, error) {
	w, err := f.CheckpointStore.BeginCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	return plainWriter{w}, nil
}

func (f fencedPrune) Prune(context.Context, string, int) (int, error) {
	return 0, carryover.Errorf(carryover.CodeNotOwner, "session is not owned by this node (injected)")
}

// TestPruneRefusedAfterCommitKeepsTheCheckpoint: a checkpoint that committed is the answer even when
// the pruning of older ones after it fails; the failure is reported beside it, never as the
// checkpoint's (a turn saved was answered not_owner, "not saved", and its client ran it again).
func TestPruneRefusedAfterCommitKeepsTheCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "p1")
	c.Store = fencedPrune{c.Store}
	k := agentKernel(t, c, ws, spool)
	run(t, k, "x = 41 + 1")
	res, err := c.Checkpoint(ctx, k, "p1", 1, ws)
	if err != nil || res == nil {
		t.Fatalf("checkpoint with its prune refused: %v %+v, want the committed checkpoint", err, res)
	}
	if !errors.Is(res.PruneError, carryover.ErrNotOwner) {
		t.Errorf("prune error = %v, want the refusal", res.PruneError)
	}
	latest, err := c.Store.LatestCheckpoint(ctx, "p1")
	if err != nil || latest.ID != res.ID {
		t.Fatalf("latest checkpoint %q (%v), want the one answered, %q", latest.ID, err, res.ID)
	}
}

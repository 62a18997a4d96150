package client_test

import (
	"testing"

	"github.com/carryover/carryover/client"
)

func TestCheckpointsAndRestore(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	run(t, s.ID, "x = 1")
	run(t, s.ID, "x = 2")
	now, err := api.Checkpoint(ctx, s.ID)
	if err != nil || now.ID == "" {
		t.Fatalf("Checkpoint: %+v, %v", now, err)
	}
	cps, err := api.Checkpoints(ctx, s.ID)
	if err != nil || len(cps) < 2 {
		t.Fatalf("Checkpoints: %+v, %v", cps, err)
	}
	var first *client.CheckpointInfo
	for i := range cps {
		if cps[i].Turn == 1 {
			first = &cps[i]
		}
	}
	if first == nil || first.CreatedAt.IsZero() || !contains(first.Variables, "x") {
		t.Fatalf("no turn 1 checkpoint with x in %+v", cps)
	}
	sess, rr, err := api.RestoreCheckpoint(ctx, s.ID, first.ID)
	if err != nil || sess.ID != s.ID || rr.CheckpointID != first.ID || !contains(rr.Restored, "x") {
		t.Fatalf("RestoreCheckpoint: %+v, %+v, %v", sess, rr, err)
	}
	if got := resultOf(run(t, s.ID, "x")); got != "1" {
		t.Fatalf("x after restore = %s", got)
	}
}

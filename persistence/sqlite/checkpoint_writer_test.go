package sqlite

import (
	"context"
	"errors"
	"testing"

	"github.com/carryover/carryover"
)

// TestWriterAfterClose: a closed writer refuses puts and commits (its chunks would have no protection
// from GC), and closing it again does not release the GC lock twice.
func TestWriterAfterClose(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	w, err := s.BeginCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	w.Close()
	if _, err := w.PutChunks(ctx, nil); !errors.Is(err, errWriterClosed) {
		t.Fatalf("put after close: %v", err)
	}
	if err := w.Commit(ctx, carryover.Checkpoint{ID: "c"}); !errors.Is(err, errWriterClosed) {
		t.Fatalf("commit after close: %v", err)
	}
	if _, _, err := s.GC(ctx); err != nil { // would deadlock or panic if ckmu were unbalanced
		t.Fatal(err)
	}
}

// TestCommitPruning: the writer's CommitPruning commits the checkpoint and keeps the newest keep of
// the session's (its own included) in one transaction; a commit that fails (a root not stored)
// prunes nothing.
func TestCommitPruning(t *testing.T) {
	t.Parallel()
	s := storeT(t)
	sessionT(t, s, "a")
	ctx := context.Background()
	commit := func(id string, roots ...string) (int, error) {
		w, err := s.BeginCheckpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return w.(carryover.PruningWriter).CommitPruning(ctx, carryover.Checkpoint{ID: id, SessionID: "a", Roots: roots}, 2)
	}
	for i, id := range []string{"c1", "c2", "c3", "c4"} {
		n, err := commit(id)
		if want := min(max(i-1, 0), 1); err != nil || n != want { // 0, 0, then one each
			t.Fatalf("%s: pruned %d, %v; want %d", id, n, err, want)
		}
	}
	if _, err := commit("c5", "0123456789abcdef0123456789abcdef"); !errors.Is(err, carryover.ErrMissingChunk) {
		t.Fatalf("a root not stored: %v", err)
	}
	list, err := s.ListCheckpoints(ctx, "a")
	if err != nil || len(list) != 2 || list[0].ID != "c4" || list[1].ID != "c3" {
		t.Fatalf("left %+v, %v; want c4, c3", list, err)
	}
}

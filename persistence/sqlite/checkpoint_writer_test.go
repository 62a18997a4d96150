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

package persistence

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/carryover/carryover"
)

// countingReads is a store that counts its whole reads of a session's newest checkpoint.
type countingReads struct {
	carryover.CheckpointStore
	carryover.CheckpointHeads
	reads atomic.Int32
}

func (c *countingReads) LatestCheckpoint(ctx context.Context, id string) (carryover.Checkpoint, error) {
	c.reads.Add(1)
	return c.CheckpointStore.LatestCheckpoint(ctx, id)
}

// TestPrepareReadsTheManifestOnlyWhenTheHeadMoved: a turn's Prepare reads and parses the newest
// checkpoint whole only when it is not the one this engine last committed or read (asked by id); the
// files the next snapshot compares with are then that checkpoint's, whoever committed it. A store
// that cannot name the newest by id is read whole each time.
func TestPrepareReadsTheManifestOnlyWhenTheHeadMoved(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	sid := mustSession(t, st, "s")
	ws := t.TempDir()
	store := &countingReads{CheckpointStore: st, CheckpointHeads: st}
	c, other := &Checkpointer{Store: store}, &Checkpointer{Store: st} // other: another node, say
	commit := func(c *Checkpointer, file string) *carryover.CheckpointResult {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, file), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := c.Prepare(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.checkpointOnce(ctx, nil, p, 1, ws, &snapshotAnswer{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	prepare := func(wantParent string, wantFiles, wantReads int) {
		t.Helper()
		p, err := c.Prepare(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if p.parentID != wantParent || len(p.prevFiles) != wantFiles || int(store.reads.Load()) != wantReads {
			t.Fatalf("prepared on %q with %d files after %d whole reads; want %q, %d files, %d reads",
				p.parentID, len(p.prevFiles), store.reads.Load(), wantParent, wantFiles, wantReads)
		}
	}
	first := commit(c, "a.txt") // its own Prepare read: no checkpoint yet
	prepare(first.ID, 1, 1)     // the head it committed: no read
	prepare(first.ID, 1, 1)
	second := commit(other, "b.txt") // committed elsewhere: the head moved
	prepare(second.ID, 2, 2)
	prepare(second.ID, 2, 2)
	store.CheckpointHeads = nil // a store without heads: read whole every time
	c2 := &Checkpointer{Store: struct{ carryover.CheckpointStore }{store}}
	for i := range 2 {
		if p, err := c2.Prepare(ctx, sid); err != nil || p.parentID != second.ID || int(store.reads.Load()) != 3+i {
			t.Fatalf("without heads: %v, %d reads", err, store.reads.Load())
		}
	}
}

package persistence

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

func TestCommitCheckpoint(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	if _, err := s.LatestCheckpoint(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of empty session: %v", err)
	}
	r1, r2 := rawChunkT(t, s, []byte("one")), rawChunkT(t, s, []byte("two"))
	cp := carryover.Checkpoint{ID: "c1", SessionID: "a", Turn: 1, Manifest: []byte(`{"v":1}`), Bytes: 6, Roots: []string{r2, r1, r2}}
	s.Lock()
	err := s.CommitCheckpoint(ctx, cp)
	s.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCheckpoint(ctx, "a", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Turn != 1 || string(got.Manifest) != `{"v":1}` || got.Bytes != 6 || fmt.Sprint(got.Roots) != fmt.Sprint([]string{r2, r1}) || got.CreatedAt.IsZero() {
		t.Fatalf("got %+v", got)
	}
	if err := s.CommitCheckpoint(ctx, cp); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	if err := s.CommitCheckpoint(ctx, carryover.Checkpoint{ID: "cx", SessionID: "nope", Roots: []string{r1}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing session: %v", err)
	}
	if _, err := s.GetCheckpoint(ctx, "other", "c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("checkpoint of another session: %v", err)
	}

	// A missing root fails the commit and leaves nothing behind.
	absent := chunk.Hash([]byte("never stored"))
	err = s.CommitCheckpoint(ctx, carryover.Checkpoint{ID: "c2", SessionID: "a", Turn: 2, ParentID: "c1", Roots: []string{r1, absent}})
	if !errors.Is(err, ErrMissingChunk) {
		t.Fatalf("missing root: %v", err)
	}
	if _, err := s.GetCheckpoint(ctx, "a", "c2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed checkpoint is visible: %v", err)
	}
	var n int
	if err := s.DB().Get(&n, `SELECT COUNT(*) FROM checkpoint_roots WHERE checkpoint_id = 'c2'`); err != nil || n != 0 {
		t.Fatalf("failed checkpoint left %d roots (%v)", n, err)
	}
	latest, err := s.LatestCheckpoint(ctx, "a")
	if err != nil || latest.ID != "c1" {
		t.Fatalf("latest after failed commit: %+v %v", latest, err)
	}
}

func TestListAndPruneCheckpoints(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	sessionT(t, s, "b")
	for i := 1; i <= 5; i++ {
		r := rawChunkT(t, s, []byte(fmt.Sprint("turn ", i)))
		if err := s.CommitCheckpoint(ctx, carryover.Checkpoint{ID: fmt.Sprint("a", i), SessionID: "a", Turn: i, Roots: []string{r}}); err != nil {
			t.Fatal(err)
		}
	}
	rb := rawChunkT(t, s, []byte("b"))
	if err := s.CommitCheckpoint(ctx, carryover.Checkpoint{ID: "b1", SessionID: "b", Turn: 1, Roots: []string{rb}}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListCheckpoints(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 5 || list[0].ID != "a5" || list[4].ID != "a1" || len(list[0].Roots) != 1 {
		t.Fatalf("list %+v", list)
	}
	if latest, _ := s.LatestCheckpoint(ctx, "a"); latest.ID != "a5" {
		t.Fatalf("latest %s", latest.ID)
	}
	n, err := s.Prune(ctx, "a", 2)
	if err != nil || n != 3 {
		t.Fatalf("prune keep 2: deleted %d, %v", n, err)
	}
	list, _ = s.ListCheckpoints(ctx, "a")
	if len(list) != 2 || list[0].ID != "a5" || list[1].ID != "a4" {
		t.Fatalf("after prune %+v", list)
	}
	// keep 0 still keeps the latest.
	if n, err := s.Prune(ctx, "a", 0); err != nil || n != 1 {
		t.Fatalf("prune keep 0: %d %v", n, err)
	}
	if latest, err := s.LatestCheckpoint(ctx, "a"); err != nil || latest.ID != "a5" {
		t.Fatalf("latest after prune: %+v %v", latest, err)
	}
	if list, _ := s.ListCheckpoints(ctx, "b"); len(list) != 1 {
		t.Fatalf("prune of a touched b: %+v", list)
	}
	// Pruned checkpoints' chunks are garbage now: 4 turns' chunks.
	if c, _, err := s.GC(ctx); err != nil || c != 4 {
		t.Fatalf("gc after prune freed %d (err %v), want 4", c, err)
	}
}

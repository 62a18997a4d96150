package sqlite

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestGCRemovesEdges: a collected descriptor takes its chunk_refs rows with it (the reachability
// itself is storetest's GCFollowsDescriptors).
func TestGCRemovesEdges(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	child := rawChunkT(t, s, randomBytes(t, 2000))
	desc, _ := json.Marshal(map[string]any{"chunks": []string{child}})
	descH := rawChunkT(t, s, desc, child)
	if n, _, err := s.GC(ctx); err != nil || n != 2 {
		t.Fatalf("gc freed %d (err %v), want 2", n, err)
	}
	var refs int
	if err := s.db.Get(&refs, `SELECT COUNT(*) FROM chunk_refs WHERE parent = ?`, descH); err != nil || refs != 0 {
		t.Fatalf("edges of a collected descriptor remain: %d %v", refs, err)
	}
}

// TestGCWaitsForOpenWriter: this backend spares an open writer's chunks by making GC wait for it.
func TestGCWaitsForOpenWriter(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	w, err := s.BeginCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := rawChunkT(t, s, []byte("put, not yet committed"))
	done := make(chan int)
	go func() {
		n, _, _ := s.GC(ctx)
		done <- n
	}()
	select {
	case <-done:
		t.Fatal("GC ran while a checkpointer held the lock")
	case <-time.After(50 * time.Millisecond):
	}
	if err := w.Commit(ctx, carryover.Checkpoint{ID: "c", SessionID: "a", Roots: []string{h}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if n := <-done; n != 0 {
		t.Fatalf("GC freed %d chunks of a committed checkpoint", n)
	}
}

// TestGCShrinksFile: freed pages go back to the file system (incremental vacuum).
func TestGCShrinksFile(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	for i := 0; i < 16; i++ {
		rawChunkT(t, s, randomBytes(t, 1<<20))
	}
	var free, pages int
	if n, _, err := s.GC(ctx); err != nil || n != 16 {
		t.Fatalf("gc: %d %v", n, err)
	}
	if err := s.db.Get(&free, `PRAGMA freelist_count`); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Get(&pages, `PRAGMA page_count`); err != nil {
		t.Fatal(err)
	}
	if free != 0 || pages*pageSize > 4<<20 {
		t.Fatalf("after gc: %d free pages, %d pages: space not returned", free, pages)
	}
}

// TestGCAfterTheWritersConnectionWasGivenUp: the incremental vacuum runs on the writer's
// connection, which it replaces when database/sql has given up on it (as every write does), instead
// of failing every GC from then on.
func TestGCAfterTheWritersConnectionWasGivenUp(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		rawChunkT(t, s, randomBytes(t, 1<<20))
	}
	s.wmu.Lock()
	s.wconn.Close()
	s.wmu.Unlock()
	if err := s.incrementalVacuum(ctx); err != nil {
		t.Fatalf("incremental vacuum on a writer connection given up: %v", err)
	}
	if n, _, err := s.GC(ctx); err != nil || n != 4 {
		t.Fatalf("gc: %d %v", n, err)
	}
	var free int
	if err := s.db.Get(&free, `PRAGMA freelist_count`); err != nil || free != 0 {
		t.Fatalf("after gc: %d free pages, %v", free, err)
	}
}

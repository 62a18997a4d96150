package persistence

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

func TestGCKeepsReachableThroughDescriptors(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	big := randomBytes(t, 256<<10)
	d1, d2, shared := rawChunkT(t, s, big[:100<<10]), rawChunkT(t, s, big[100<<10:]), rawChunkT(t, s, []byte("shared"))
	mid, _ := json.Marshal(map[string]any{"chunks": []string{d2, shared}})
	midH := rawChunkT(t, s, mid, d2, shared)
	top, _ := json.Marshal(map[string]any{"chunks": []string{d1, midH}})
	topH := rawChunkT(t, s, top, d1, midH)
	if err := s.CommitCheckpoint(ctx, carryover.Checkpoint{ID: "c1", SessionID: "a", Roots: []string{topH}}); err != nil {
		t.Fatal(err)
	}
	// Garbage: a lone chunk, and a descriptor with its own child that nothing names.
	lone := rawChunkT(t, s, randomBytes(t, 1000))
	gchild := rawChunkT(t, s, randomBytes(t, 2000))
	gdesc, _ := json.Marshal(map[string]any{"chunks": []string{gchild, shared}})
	gdescH := rawChunkT(t, s, gdesc, gchild, shared)

	n, freed, err := s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || freed != int64(1000+2000+len(gdesc)) {
		t.Fatalf("gc freed %d chunks / %d bytes, want 3 / %d", n, freed, 1000+2000+len(gdesc))
	}
	for _, h := range []string{lone, gchild, gdescH} {
		if _, err := s.ReadChunk(ctx, h, nil); err == nil {
			t.Errorf("garbage chunk %s survived", h)
		}
	}
	var buf bytes.Buffer
	for _, h := range []string{d1, d2, shared, midH, topH} {
		if _, err := s.ReadChunkTo(ctx, h, &buf); err != nil {
			t.Errorf("reachable chunk %s: %v", h, err)
		}
	}
	var refs int
	if err := s.DB().Get(&refs, `SELECT COUNT(*) FROM chunk_refs WHERE parent = ?`, gdescH); err != nil || refs != 0 {
		t.Fatalf("edges of a collected descriptor remain: %d %v", refs, err)
	}
	if n, _, err := s.GC(ctx); err != nil || n != 0 {
		t.Fatalf("second gc freed %d (err %v)", n, err)
	}
}

func TestGCWaitsForLock(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	s.Lock()
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
	if err := s.CommitCheckpoint(ctx, carryover.Checkpoint{ID: "c", SessionID: "a", Roots: []string{h}}); err != nil {
		t.Fatal(err)
	}
	s.Unlock()
	if n := <-done; n != 0 {
		t.Fatalf("GC freed %d chunks of a committed checkpoint", n)
	}
}

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
	if err := s.DB().Get(&free, `PRAGMA freelist_count`); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().Get(&pages, `PRAGMA page_count`); err != nil {
		t.Fatal(err)
	}
	if free != 0 || pages*pageSize > 4<<20 {
		t.Fatalf("after gc: %d free pages, %d pages: space not returned", free, pages)
	}
}

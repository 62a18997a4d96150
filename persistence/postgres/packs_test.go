package postgres

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/carryover/carryover/persistence/format"
)

// countingGets counts an object store's GETs.
type countingGets struct {
	ObjectStore
	gets atomic.Int64
}

func (c *countingGets) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.ObjectStore.Get(ctx, key)
}

// offsetOf is the catalog's offset of a packed chunk (-1: a whole object, or inline).
func offsetOf(t testing.TB, s *Store, hash string) int64 {
	t.Helper()
	var off *int64
	if err := s.db.Get(&off, `SELECT object_offset FROM chunks WHERE hash = $1`, hash); err != nil {
		t.Fatal(err)
	}
	if off == nil {
		return -1
	}
	return *off
}

// TestPacks: one put's large chunks go up in packs of at most PackMax bytes, each chunk a range of
// its pack, read back by a node with no cache with one GET a pack (raw and zstd chunks); GC deletes
// a pack only once none of its chunks is live: collecting one chunk of a pack keeps it and its
// other chunk readable, collecting the last tombstones it, and the next GC deletes it.
func TestPacks(t *testing.T) {
	t.Parallel()
	b := bucketT(t, "")
	s := storeT(t, Options{Objects: b, InlineMax: 1000, PackMax: 12000, TombstoneGrace: time.Nanosecond})
	ctx := context.Background()
	sessionT(t, s, "s")
	zdata := append(randomT(t, 3000), bytes.Repeat([]byte("compressible "), 2000)...)
	zc, err := chunk.Encode(zdata, nil)
	if err != nil || zc.Codec != chunk.CodecZstd {
		t.Fatalf("encode: %v %s", err, zc.Codec)
	}
	x, y, w := rawChunk(randomT(t, 5000)), rawChunk(randomT(t, 5000)), rawChunk(randomT(t, 5000))
	putCommit(t, s, "s", "c1", x, y, w, zc)
	kx, ky, kw := objectKeyOf(t, s, x.Hash), objectKeyOf(t, s, y.Hash), objectKeyOf(t, s, w.Hash)
	if kx != ky || !strings.HasPrefix(kx, "chunks/packs/") || kw == kx {
		t.Fatalf("keys x %s y %s w %s: want x and y in one pack, w in the next", kx, ky, kw)
	}
	if ox, oy := offsetOf(t, s, x.Hash), offsetOf(t, s, y.Hash); ox != 0 || oy != 5000 {
		t.Fatalf("offsets %d %d, want 0 5000", ox, oy)
	}
	counted := &countingGets{ObjectStore: b}
	fresh := &Store{db: s.db, opts: s.opts}
	fresh.opts.Objects = counted
	for _, c := range [][]byte{x.Data, y.Data, w.Data, zdata, y.Data} {
		if got, err := fresh.ReadChunk(ctx, chunk.Hash(c), nil); err != nil || !bytes.Equal(got, c) {
			t.Fatalf("read back a packed chunk: %v", err)
		}
	}
	if n := counted.gets.Load(); n != 2 {
		t.Fatalf("%d GETs to read the chunks of 2 packs, want one a pack", n)
	}

	putCommit(t, s, "s", "c2", y) // y stays live; x, w and zc go with c1
	if n, err := s.Prune(ctx, "s", 1); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	exists := func(k string) bool { ok, err := b.Exists(ctx, k); return err == nil && ok }
	for range 2 { // the second deletes what the first tombstoned
		if _, _, err := s.GC(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !exists(kx) {
		t.Fatal("GC deleted a pack one of whose chunks is live")
	}
	if exists(kw) {
		t.Fatalf("the pack %s of collected chunks only survived GC", kw)
	}
	if got, err := fresh.ReadChunk(ctx, y.Hash, nil); err != nil || !bytes.Equal(got, y.Data) {
		t.Fatalf("the live chunk of a half-collected pack: %v", err)
	}
	noDanglingObjects(t, s, exists)

	putCommit(t, s, "s", "c3", rawChunk([]byte("small")))
	s.Prune(ctx, "s", 1)
	for range 2 {
		if _, _, err := s.GC(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if exists(kx) {
		t.Fatal("the pack outlived its last chunk")
	}
}

// TestPacksOf: packs keep the chunks' order, hold at most max bytes, and a larger chunk goes alone.
func TestPacksOf(t *testing.T) {
	t.Parallel()
	var cs []*carryover.ChunkInput
	for _, n := range []int{3, 3, 5, 9, 1, 1} {
		c := rawChunk(make([]byte, n))
		cs = append(cs, &c)
	}
	var sizes []int
	for _, p := range packsOf(cs, 6) {
		sizes = append(sizes, len(p))
	}
	if got := len(sizes); got != 4 || sizes[0] != 2 || sizes[1] != 1 || sizes[2] != 1 || sizes[3] != 2 {
		t.Fatalf("packs of sizes %v, want [2 1 1 2]", sizes)
	}
	if got := len(packsOf(cs, -1)); got != len(cs) {
		t.Fatalf("with packs off: %d objects for %d chunks", got, len(cs))
	}
}

// TestNoPacksBesideAnOldNode: while the cluster writes a format older than format.Packs (a node of
// an older build is live, which would read a pack whole), each chunk goes up as an object of its own.
func TestNoPacksBesideAnOldNode(t *testing.T) {
	t.Parallel()
	s := storeT(t, Options{Objects: bucketT(t, ""), InlineMax: 1000, MaxFormat: format.Packs - 1})
	sessionT(t, s, "s")
	x, y := rawChunk(randomT(t, 5000)), rawChunk(randomT(t, 5000))
	putCommit(t, s, "s", "c1", x, y)
	kx, ky := objectKeyOf(t, s, x.Hash), objectKeyOf(t, s, y.Hash)
	if kx == ky || strings.Contains(kx, "/packs/") || offsetOf(t, s, x.Hash) != -1 {
		t.Fatalf("packed beside an old node: %s %s", kx, ky)
	}
}

// TestPackReads: readers of one pack wait for one fetch; a failed fetch is not held; at most
// packsHeld packs are kept.
func TestPackReads(t *testing.T) {
	t.Parallel()
	var p packReads
	ctx := context.Background()
	var fetches atomic.Int64
	release := make(chan struct{})
	slow := func() ([]byte, error) { fetches.Add(1); <-release; return []byte("pack"), nil }
	got := make(chan string, 2)
	for range 2 {
		go func() { b, _ := p.get(ctx, "k", slow); got <- string(b) }()
	}
	for fetches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if a, b := <-got, <-got; a != "pack" || b != "pack" || fetches.Load() != 1 {
		t.Fatalf("two readers: %q %q, %d fetches, want one", a, b, fetches.Load())
	}
	if _, err := p.get(ctx, "bad", func() ([]byte, error) { return nil, errors.New("down") }); err == nil {
		t.Fatal("a failed fetch answered bytes")
	}
	if b, err := p.get(ctx, "bad", func() ([]byte, error) { return []byte("back"), nil }); err != nil || string(b) != "back" {
		t.Fatalf("after a failed fetch: %q %v", b, err)
	}
	for i := range packsHeld + 2 {
		p.get(ctx, string(rune('a'+i)), func() ([]byte, error) { return nil, nil })
	}
	if len(p.packs) != packsHeld || len(p.order) != packsHeld {
		t.Fatalf("%d packs held, want %d", len(p.packs), packsHeld)
	}
}

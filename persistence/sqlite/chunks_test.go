package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// TestConcurrentReadersAndWriters: under WAL, reads proceed beside the single writer.
func TestConcurrentReadersAndWriters(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	var hashes []string
	for i := range 8 {
		hashes = append(hashes, rawChunkT(t, s, bytes.Repeat([]byte{byte(i)}, 100_000+i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for i := range 50 {
				h := hashes[(r+i)%len(hashes)]
				var err error
				if buf, err = s.ReadChunk(ctx, h, buf[:0]); err != nil {
					errs <- err
					return
				}
				if _, err := s.ReadChunkTo(ctx, h, io.Discard); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				c, _ := chunk.Encode(randomBytes(t, 50_000), nil)
				if _, err := s.putChunks(ctx, []carryover.ChunkInput{c}); err != nil {
					errs <- err
					return
				}
				if _, err := s.AppendEvent(ctx, "a", "w", map[string]int{"w": w, "i": i}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if evs, _ := s.ListEvents(ctx, "a", 0, 0, ""); len(evs) != 60 {
		t.Fatalf("%d events", len(evs))
	}
}

func TestReadDetectsCorruption(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	h := rawChunkT(t, s, []byte("precious bytes"))
	if _, err := s.db.Exec(`UPDATE chunks SET data = ? WHERE hash = ?`, []byte("precious bytez"), h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadChunk(ctx, h, nil); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("corrupted chunk read: %v", err)
	}
	if _, err := s.ReadChunkTo(ctx, h, &bytes.Buffer{}); err == nil {
		t.Fatal("corrupted chunk streamed")
	}
}

// TestReadMissingChunk: a chunk that is not stored is not found and names the missing chunk.
func TestReadMissingChunk(t *testing.T) {
	s := storeT(t)
	_, err := s.ReadChunk(context.Background(), chunk.Hash([]byte("absent")), nil)
	if !errors.Is(err, carryover.ErrMissingChunk) || !errors.Is(err, carryover.ErrNotFound) {
		t.Fatalf("missing chunk: %v", err)
	}
}

// TestManyChildren: a descriptor listing more children than one statement holds (a 1 GiB array's
// ~1,000 chunks) records every edge once, and one missing child in a later batch fails the put with
// ErrMissingChunk naming it, storing nothing.
func TestManyChildren(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	var kids []string
	for i := range 2*edgeBatch + 7 {
		kids = append(kids, rawChunkT(t, s, []byte(fmt.Sprintf("child %d", i))))
	}
	parent := rawChunkT(t, s, []byte("descriptor"), append(kids, kids[3])...) // a child listed twice
	var edges int
	if err := s.db.Get(&edges, `SELECT count(*) FROM chunk_refs WHERE parent = ?`, parent); err != nil {
		t.Fatal(err)
	}
	if edges != len(kids) {
		t.Fatalf("%d edges, want %d", edges, len(kids))
	}
	absent := chunk.Hash([]byte("never stored"))
	bad := append(append([]string{}, kids...), absent)
	data := []byte("descriptor 2")
	c := carryover.ChunkInput{Hash: chunk.Hash(data), Codec: chunk.CodecRaw, RawLen: int64(len(data)), Data: data, Children: bad}
	_, err := s.putChunks(ctx, []carryover.ChunkInput{c})
	if !errors.Is(err, carryover.ErrMissingChunk) || !strings.Contains(err.Error(), absent) {
		t.Fatalf("put with a missing child: %v", err)
	}
	if _, err := s.ReadChunk(ctx, c.Hash, nil); !errors.Is(err, carryover.ErrMissingChunk) {
		t.Fatalf("the refused parent was stored: %v", err)
	}
}

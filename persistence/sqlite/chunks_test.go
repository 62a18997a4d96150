package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
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
	if evs, _ := s.ListEvents(ctx, "a", carryover.EventQuery{}); len(evs) != 60 {
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
	c := rawInput([]byte("descriptor 2"), bad...)
	_, err := s.putChunks(ctx, []carryover.ChunkInput{c})
	if !errors.Is(err, carryover.ErrMissingChunk) || !strings.Contains(err.Error(), absent) {
		t.Fatalf("put with a missing child: %v", err)
	}
	if _, err := s.ReadChunk(ctx, c.Hash, nil); !errors.Is(err, carryover.ErrMissingChunk) {
		t.Fatalf("the refused parent was stored: %v", err)
	}
}

// TestChunkRefsMigration: migration 0003 keeps every edge of a store made before it and leaves
// chunk_refs with no index or foreign key on child (random inserts that grew each put with the store).
func TestChunkRefsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	kid := rawChunkT(t, s, []byte("kid"))
	parent := rawChunkT(t, s, []byte("parent"), kid)
	for _, q := range []string{ // back to the schema before 0003, edges included
		`DROP TABLE chunk_refs`,
		`CREATE TABLE chunk_refs (parent TEXT NOT NULL REFERENCES chunks (hash) ON DELETE CASCADE,
			child TEXT NOT NULL REFERENCES chunks (hash) DEFERRABLE INITIALLY DEFERRED,
			PRIMARY KEY (parent, child)) WITHOUT ROWID`,
		`CREATE INDEX chunk_refs_child ON chunk_refs (child)`,
		`INSERT INTO chunk_refs (parent, child) VALUES ('` + parent + `', '` + kid + `')`,
		`DELETE FROM schema_migrations WHERE name LIKE '%0003_%'`,
	} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var edges, childIndexes, childKeys int
	if err := s.db.Get(&edges, `SELECT count(*) FROM chunk_refs WHERE parent = ? AND child = ?`, parent, kid); err != nil || edges != 1 {
		t.Fatalf("edge after the migration: %d, %v", edges, err)
	}
	if err := s.db.Get(&childIndexes, `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'chunk_refs'`); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Get(&childKeys, `SELECT count(*) FROM pragma_foreign_key_list('chunk_refs') WHERE "from" = 'child'`); err != nil {
		t.Fatal(err)
	}
	if childIndexes != 0 || childKeys != 0 {
		t.Fatalf("chunk_refs still has %d indexes and %d foreign keys on child", childIndexes, childKeys)
	}
}

package persistence

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/carryover/carryover/persistence/sqlite"
)

// putChunkT stores raw as a chunk through w and returns it as a descriptor lists it.
func putChunkT(t testing.TB, w carryover.CheckpointWriter, raw []byte) descChunk {
	t.Helper()
	c, err := chunk.Encode(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.PutChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
		t.Fatal(err)
	}
	return descChunk{Hash: c.Hash, Len: int64(len(raw))}
}

// storeT opens a SQLite store on a fresh file in t.TempDir and closes it when the test ends.
func storeT(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "carryover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writerT begins a checkpoint on s; it is closed when the test ends unless the test closed it before
// (Close is idempotent), which it must do before running GC in the same goroutine.
func writerT(t testing.TB, s carryover.CheckpointStore) carryover.CheckpointWriter {
	t.Helper()
	w, err := s.BeginCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// mustSession creates session id in s and returns the id.
func mustSession(t testing.TB, s carryover.SessionStore, id string) string {
	t.Helper()
	if err := s.CreateSession(context.Background(), carryover.SessionRecord{ID: id, State: "running", Doc: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return id
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

package sqlite

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/carryover/carryover/persistence/storetest"
)

// TestStore runs the contract every carryover.Store backend passes, on a fresh file per subtest.
func TestStore(t *testing.T) {
	storetest.RunStoreTests(t, func(t *testing.T) carryover.Store {
		s, err := Open(filepath.Join(t.TempDir(), "carryover.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// storeT opens a store on a fresh file in t.TempDir and closes it when the test ends.
func storeT(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "carryover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sessionT creates session id in s.
func sessionT(t testing.TB, s *Store, id string) {
	t.Helper()
	if err := s.CreateSession(context.Background(), carryover.SessionRecord{ID: id, State: "running", Doc: []byte(`{"id":"` + id + `"}`)}); err != nil {
		t.Fatal(err)
	}
}

// rawChunkT stores data as a raw chunk and returns its hash. It bypasses the writers: only tests that
// run no GC concurrently use it.
func rawChunkT(t testing.TB, s *Store, data []byte, children ...string) string {
	t.Helper()
	c := rawInput(data, children...)
	if _, err := s.putChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
		t.Fatal(err)
	}
	return c.Hash
}

// rawInput is a raw (uncompressed) chunk of data listing children.
func rawInput(data []byte, children ...string) carryover.ChunkInput {
	return carryover.ChunkInput{Hash: chunk.Hash(data), Codec: chunk.CodecRaw, RawLen: int64(len(data)), Data: data, Children: children}
}

// commitT commits cp outside any writer (the test runs no GC concurrently).
func commitT(t testing.TB, s *Store, cp carryover.Checkpoint) {
	t.Helper()
	if err := s.commitCheckpoint(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/carryover/carryover"
)

// errWriterClosed is returned by a CheckpointWriter used after Close.
var errWriterClosed = errors.New("checkpoint writer is closed")

// checkpointWriter is one checkpoint in progress: a writers row whose pins keep every chunk it put
// from GC (on any node) until Close deletes the row.
type checkpointWriter struct {
	s      *Store
	id     string
	mu     sync.Mutex // held by puts and commits, so Close waits for them
	closed bool
}

// BeginCheckpoint registers a writer.
func (s *Store) BeginCheckpoint(ctx context.Context) (carryover.CheckpointWriter, error) {
	b := make([]byte, 12)
	rand.Read(b)
	id := hex.EncodeToString(b)
	// ON CONFLICT: a lost connection's insert runs again (execSame) and may find its own row.
	if _, err := s.execSame(ctx, `INSERT INTO writers (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, id); err != nil {
		return nil, fmt.Errorf("begin checkpoint: %w", err)
	}
	return &checkpointWriter{s: s, id: id}, nil
}

// PutChunks stores the chunks not stored yet and pins them all for this writer.
func (w *checkpointWriter) PutChunks(ctx context.Context, chunks []carryover.ChunkInput) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errWriterClosed
	}
	return w.s.putChunks(ctx, w.id, chunks)
}

// Commit records cp with its roots in one transaction (see Store.commitCheckpoint).
func (w *checkpointWriter) Commit(ctx context.Context, cp carryover.Checkpoint) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errWriterClosed
	}
	return w.s.commitCheckpoint(ctx, cp)
}

// Close drops the writer's pins; chunks no commit named become garbage. Closing twice is harmless. A
// failed delete (database unreachable) leaves the pins to GC's age limit.
func (w *checkpointWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	w.s.execSame(context.Background(), `DELETE FROM writers WHERE id = $1`, w.id)
}

// The reads of a writer are the store's.

func (w *checkpointWriter) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	return w.s.ReadChunk(ctx, hash, buf)
}

func (w *checkpointWriter) ReadChunkTo(ctx context.Context, hash string, dst io.Writer) (int64, error) {
	return w.s.ReadChunkTo(ctx, hash, dst)
}

func (w *checkpointWriter) MissingChunks(ctx context.Context, hashes []string) ([]string, error) {
	return w.s.MissingChunks(ctx, hashes)
}

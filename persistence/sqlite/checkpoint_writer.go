package sqlite

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/carryover/carryover"
)

// errWriterClosed is returned by a CheckpointWriter used after Close.
var errWriterClosed = errors.New("checkpoint writer is closed")

// checkpointWriter is one checkpoint in progress. It holds the shared side of Store.ckmu from
// BeginCheckpoint until Close: chunks it puts are unreachable until its commit names them, and GC,
// which takes ckmu exclusively, must not collect them in between. Checkpoints of different sessions
// proceed side by side (their SQLite writes are still serialised by the writer mutex, but reading and
// hashing files is not).
type checkpointWriter struct {
	s      *Store
	mu     sync.Mutex // held by puts and commits, so Close waits for them
	closed bool
}

// BeginCheckpoint starts writing a checkpoint. It waits while a GC runs. A goroutine must not hold
// two writers at once: a GC queued between them would wait for the first while the second waits for it.
func (s *Store) BeginCheckpoint(ctx context.Context) (carryover.CheckpointWriter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.ckmu.RLock()
	return &checkpointWriter{s: s}, nil
}

// PutChunks stores the chunks not stored yet (see Store.putChunks).
func (w *checkpointWriter) PutChunks(ctx context.Context, chunks []carryover.ChunkInput) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errWriterClosed
	}
	return w.s.putChunks(ctx, chunks)
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

// CommitPruning commits cp and prunes its session to keep checkpoints in one transaction
// (carryover.PruningWriter).
func (w *checkpointWriter) CommitPruning(ctx context.Context, cp carryover.Checkpoint, keep int) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errWriterClosed
	}
	return w.s.commitPruning(ctx, cp, keep)
}

// Close lets GC run again; chunks no commit named become garbage. Closing twice is harmless.
func (w *checkpointWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.s.ckmu.RUnlock()
	}
}

// The reads of a writer are the store's: chunks are visible to every reader once put.

func (w *checkpointWriter) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	return w.s.ReadChunk(ctx, hash, buf)
}

func (w *checkpointWriter) ReadChunkTo(ctx context.Context, hash string, dst io.Writer) (int64, error) {
	return w.s.ReadChunkTo(ctx, hash, dst)
}

func (w *checkpointWriter) MissingChunks(ctx context.Context, hashes []string) ([]string, error) {
	return w.s.MissingChunks(ctx, hashes)
}

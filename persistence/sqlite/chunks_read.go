package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// inBatch bounds the number of host parameters of one IN (...) list.
const inBatch = 500

// MissingChunks returns the subset of hashes not in the store, in input order, each once.
func (s *Store) MissingChunks(ctx context.Context, hashes []string) ([]string, error) {
	if len(hashes) == 1 {
		// The workspace snapshot asks about one chunk at a time: the prepared lookup spares a query plan.
		if ok, err := chunkExists(ctx, s.existStmt, hashes[0]); err != nil || ok {
			return nil, err
		}
		return []string{hashes[0]}, nil
	}
	present := make(map[string]bool, len(hashes))
	for start := 0; start < len(hashes); start += inBatch {
		batch := hashes[start:min(start+inBatch, len(hashes))]
		q := `SELECT hash FROM chunks WHERE hash IN (?` + strings.Repeat(",?", len(batch)-1) + `)`
		args := make([]any, len(batch))
		for i, h := range batch {
			args[i] = h
		}
		var found []string
		if err := s.db.SelectContext(ctx, &found, q, args...); err != nil {
			return nil, fmt.Errorf("missing chunks: %w", err)
		}
		for _, h := range found {
			present[h] = true
		}
	}
	var missing []string
	for _, h := range hashes {
		if !present[h] {
			present[h] = true // report each hash once
			missing = append(missing, h)
		}
	}
	return missing, nil
}

// ReadChunk appends the RAW bytes of a chunk (decompressed) to buf (may be nil) and returns the result,
// so that callers reading many chunks reuse one buffer. The bytes are checked against the hash.
// A chunk that is not stored is CodeNotFound, wrapping carryover.ErrMissingChunk.
func (s *Store) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	err := s.withChunk(ctx, hash, func(codec string, rawLen int64, data []byte) error {
		start := len(buf)
		out, err := chunk.Decode(codec, data, buf)
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if err := chunk.Verify(hash, rawLen, out[start:]); err != nil {
			return err
		}
		buf = out
		return nil
	})
	return buf, err
}

// decodeBufs recycles the buffers zstd chunks are decoded into by ReadChunkTo.
var decodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// ReadChunkTo writes the RAW bytes of a chunk to w and returns how many it wrote. A raw chunk goes from
// the driver's buffer straight to w (no further copy), so restoring is about as fast as SELECTing blobs.
func (s *Store) ReadChunkTo(ctx context.Context, hash string, w io.Writer) (int64, error) {
	var n int
	err := s.withChunk(ctx, hash, func(codec string, rawLen int64, data []byte) error {
		out := data
		if codec != chunk.CodecRaw {
			bp := decodeBufs.Get().(*[]byte)
			defer func() {
				if cap(*bp) <= 64<<20 {
					decodeBufs.Put(bp)
				}
			}()
			b, err := chunk.Decode(codec, data, (*bp)[:0])
			if err != nil {
				return fmt.Errorf("decode: %w", err)
			}
			*bp, out = b, b
		}
		if err := chunk.Verify(hash, rawLen, out); err != nil {
			return err
		}
		var err error
		n, err = w.Write(out)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	})
	return int64(n), err
}

// withChunk runs fn on the stored form of a chunk. data is only valid during fn: it is the driver's
// copy of the blob, handed over without database/sql copying it again.
func (s *Store) withChunk(ctx context.Context, hash string, fn func(codec string, rawLen int64, data []byte) error) error {
	rows, err := s.readStmt.QueryContext(ctx, hash)
	if err != nil {
		return fmt.Errorf("read chunk %s: %w", hash, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read chunk %s: %w", hash, err)
		}
		return carryover.Wrap(carryover.CodeNotFound, carryover.ErrMissingChunk, "chunk %s is not stored", hash)
	}
	var (
		codec  string
		rawLen int64
		data   sql.RawBytes
	)
	if err := rows.Scan(&codec, &rawLen, &data); err != nil {
		return fmt.Errorf("read chunk %s: %w", hash, err)
	}
	if err := fn(codec, rawLen, data); err != nil {
		return fmt.Errorf("read chunk %s: %w", hash, err)
	}
	return nil
}

// ReadStoredChunk appends the STORED bytes of a chunk (as kept: compressed when its codec is zstd)
// to buf and returns its codec, raw length and the bytes. They are not verified: a caller copying
// chunks elsewhere (an export) verifies them itself, and spares decoding and encoding them again.
func (s *Store) ReadStoredChunk(ctx context.Context, hash string, buf []byte) (string, int64, []byte, error) {
	var (
		codec  string
		rawLen int64
	)
	err := s.withChunk(ctx, hash, func(c string, n int64, data []byte) error {
		codec, rawLen, buf = c, n, append(buf, data...)
		return nil
	})
	return codec, rawLen, buf, err
}

package persistence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/jmoiron/sqlx"
)

// PutChunks inserts the chunks that are not already present, in one transaction, and returns the stored
// bytes actually written (0 for chunks that existed). Raw chunks are checked against their hash (xxh3
// runs at ~18 GiB/s, so a wrong address costs nothing to catch here and much to find later). Every child
// of a newly inserted chunk must exist once the transaction ends (already stored or in the same call):
// otherwise nothing is written and the error wraps ErrMissingChunk.
//
// Chunks put for a checkpoint are garbage until CommitCheckpoint names them: hold Lock across both.
func (s *Store) PutChunks(ctx context.Context, chunks []carryover.ChunkInput) (written int64, err error) {
	for i := range chunks {
		if err := chunk.Check(&chunks[i]); err != nil {
			return 0, err
		}
	}
	err = s.writeTx(ctx, func(tx *sqlx.Tx) error {
		written = 0
		exists, err := tx.PreparexContext(ctx, `SELECT 1 FROM chunks WHERE hash = ?`)
		if err != nil {
			return fmt.Errorf("put chunks: %w", err)
		}
		defer exists.Close()
		ins, err := tx.PreparexContext(ctx, `INSERT OR IGNORE INTO chunks (hash, codec, raw_len, stored_len, created_at, data)
			VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("put chunks: %w", err)
		}
		defer ins.Close()
		ref, err := tx.PreparexContext(ctx, `INSERT OR IGNORE INTO chunk_refs (parent, child) VALUES (?, ?)`)
		if err != nil {
			return fmt.Errorf("put chunks: %w", err)
		}
		defer ref.Close()
		now := dbTime(dbNow())
		var parents []*carryover.ChunkInput
		for i := range chunks {
			c := &chunks[i]
			if err := ctx.Err(); err != nil {
				return err
			}
			// Look first: binding a multi-MiB blob only to have it ignored would copy it for nothing.
			if ok, err := chunkExists(ctx, exists, c.Hash); err != nil {
				return err
			} else if ok {
				continue
			}
			res, err := ins.ExecContext(ctx, c.Hash, c.Codec, c.RawLen, len(c.Data), now, c.Data)
			if err != nil {
				return fmt.Errorf("put chunk %s: %w", c.Hash, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue // the same chunk twice in this call
			}
			written += int64(len(c.Data))
			for _, child := range c.Children {
				if _, err := ref.ExecContext(ctx, c.Hash, child); err != nil {
					return fmt.Errorf("put chunk %s: ref %s: %w", c.Hash, child, err)
				}
			}
			if len(c.Children) > 0 {
				parents = append(parents, c)
			}
		}
		// The deferred foreign key would refuse a dangling child at COMMIT too; checking here names it.
		for _, p := range parents {
			for _, child := range p.Children {
				if ok, err := chunkExists(ctx, exists, child); err != nil {
					return err
				} else if !ok {
					return fmt.Errorf("put chunk %s: child %s: %w", p.Hash, child, ErrMissingChunk)
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return written, nil
}

func chunkExists(ctx context.Context, stmt interface {
	QueryRowContext(context.Context, ...any) *sql.Row
}, hash string) (bool, error) {
	var one int
	err := stmt.QueryRowContext(ctx, hash).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up chunk %s: %w", hash, err)
	}
	return true, nil
}

// inBatch bounds the number of host parameters of one IN (...) list.
const inBatch = 500

// MissingChunks returns the subset of hashes not in the store, in input order, each once.
func (s *Store) MissingChunks(ctx context.Context, hashes []string) ([]string, error) {
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
// A chunk that is not stored gives an error wrapping ErrMissingChunk and ErrNotFound.
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
		return fmt.Errorf("read chunk %s: %w (%w)", hash, ErrMissingChunk, ErrNotFound)
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

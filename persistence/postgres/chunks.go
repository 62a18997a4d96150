package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/jmoiron/sqlx"
)

// shareGCLock takes the GC lock row in share mode for the rest of tx: a GC (which takes it FOR
// UPDATE) either finished before, and then tx sees what it swept, or starts after tx commits, and
// then sees tx's pins and roots.
func shareGCLock(ctx context.Context, tx *sqlx.Tx) error {
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM gc_lock WHERE id = 1 FOR SHARE`); err != nil {
		return fmt.Errorf("gc lock: %w", err)
	}
	return nil
}

// putChunks stores the chunks not stored yet, in one transaction, pins every one of them (new or
// already stored) for writer, and returns the stored bytes newly written. Every chunk is checked first
// (chunk.Check); every child of a new chunk must be stored by the end of the call, or nothing is
// written and the error wraps carryover.ErrMissingChunk.
func (s *Store) putChunks(ctx context.Context, writer string, chunks []carryover.ChunkInput) (written int64, err error) {
	for i := range chunks {
		if err := chunk.Check(&chunks[i]); err != nil {
			return 0, err
		}
	}
	err = s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := shareGCLock(ctx, tx); err != nil {
			return err
		}
		var parents []*carryover.ChunkInput
		written, parents, err = insertChunks(ctx, tx, writer, chunks)
		if err != nil {
			return err
		}
		return checkChildren(ctx, tx, parents)
	})
	if err != nil {
		return 0, err
	}
	return written, nil
}

// insertChunks inserts the chunks not stored yet with their edges, pins all of them, and returns the
// stored bytes written and the inserted chunks that have children.
func insertChunks(ctx context.Context, tx *sqlx.Tx, writer string, chunks []carryover.ChunkInput) (int64, []*carryover.ChunkInput, error) {
	var (
		written int64
		parents []*carryover.ChunkInput
		now     = nsOf(time.Time{})
		hashes  = make([]string, len(chunks))
	)
	for i := range chunks {
		hashes[i] = chunks[i].Hash
	}
	// Pin first: from here on no GC takes these hashes, stored or not.
	if _, err := tx.ExecContext(ctx, `INSERT INTO chunk_pins (writer_id, hash) SELECT $1, unnest($2::text[])
		ON CONFLICT DO NOTHING`, writer, hashes); err != nil {
		return 0, nil, fmt.Errorf("put chunks: pin: %w", err)
	}
	missing, err := missingIn(ctx, tx, hashes)
	if err != nil {
		return 0, nil, fmt.Errorf("put chunks: %w", err)
	}
	want := make(map[string]bool, len(missing))
	for _, h := range missing {
		want[h] = true
	}
	for i := range chunks {
		c := &chunks[i]
		if !want[c.Hash] {
			continue
		}
		want[c.Hash] = false // the same chunk twice in this call
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO chunks (hash, codec, raw_len, stored_len, created_at, data)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (hash) DO NOTHING`,
			c.Hash, c.Codec, c.RawLen, len(c.Data), now, c.Data); err != nil {
			return 0, nil, fmt.Errorf("put chunk %s: %w", c.Hash, err)
		}
		written += int64(len(c.Data))
		if len(c.Children) > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO chunk_refs (parent, child) SELECT $1, unnest($2::text[])
				ON CONFLICT DO NOTHING`, c.Hash, c.Children); err != nil {
				return 0, nil, fmt.Errorf("put chunk %s: refs: %w", c.Hash, err)
			}
			parents = append(parents, c)
		}
	}
	return written, parents, nil
}

// checkChildren fails with ErrMissingChunk when a child of parents is not stored. The deferred foreign
// key would refuse a dangling child at COMMIT too; checking here names it.
func checkChildren(ctx context.Context, tx *sqlx.Tx, parents []*carryover.ChunkInput) error {
	for _, p := range parents {
		missing, err := missingIn(ctx, tx, p.Children)
		if err != nil {
			return fmt.Errorf("put chunk %s: %w", p.Hash, err)
		}
		if len(missing) > 0 {
			return fmt.Errorf("put chunk %s: child %s: %w", p.Hash, missing[0], carryover.ErrMissingChunk)
		}
	}
	return nil
}

// missingIn returns those of hashes with no chunks row, in input order, each once.
func missingIn(ctx context.Context, q sqlx.QueryerContext, hashes []string) ([]string, error) {
	if len(hashes) == 0 {
		return nil, nil
	}
	var found []string
	if err := sqlx.SelectContext(ctx, q, &found, `SELECT hash FROM chunks WHERE hash = ANY($1::text[])`, hashes); err != nil {
		return nil, fmt.Errorf("look up chunks: %w", err)
	}
	present := make(map[string]bool, len(hashes))
	for _, h := range found {
		present[h] = true
	}
	var missing []string
	for _, h := range hashes {
		if !present[h] {
			present[h] = true
			missing = append(missing, h)
		}
	}
	return missing, nil
}

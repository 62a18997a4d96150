package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/jmoiron/sqlx"
)

// putChunks inserts the chunks that are not already present, in one transaction, and returns the
// stored bytes actually written (0 for chunks that existed). Every chunk is checked first (chunk.Check:
// a raw chunk must match its hash). Every child of a newly inserted chunk must exist once the
// transaction ends (already stored or in the same call): otherwise nothing is written and the error
// wraps carryover.ErrMissingChunk.
//
// Chunks put for a checkpoint are garbage until a commit names them: only a CheckpointWriter, which
// keeps GC away until it is closed, calls this.
func (s *Store) putChunks(ctx context.Context, chunks []carryover.ChunkInput) (written int64, err error) {
	for i := range chunks {
		if err := chunk.Check(&chunks[i]); err != nil {
			return 0, err
		}
	}
	err = s.writeTx(ctx, func(tx *sqlx.Tx) error {
		var parents []*carryover.ChunkInput
		written, parents, err = insertChunks(ctx, tx, chunks)
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

// insertChunks inserts the chunks not stored yet with their edges, and returns the stored bytes written
// and the inserted chunks that have children.
func insertChunks(ctx context.Context, tx *sqlx.Tx, chunks []carryover.ChunkInput) (int64, []*carryover.ChunkInput, error) {
	exists, err := tx.PreparexContext(ctx, `SELECT 1 FROM chunks WHERE hash = ?`)
	if err != nil {
		return 0, nil, fmt.Errorf("put chunks: %w", err)
	}
	defer exists.Close()
	ins, err := tx.PreparexContext(ctx, `INSERT OR IGNORE INTO chunks (hash, codec, raw_len, stored_len, created_at, data)
		VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, nil, fmt.Errorf("put chunks: %w", err)
	}
	defer ins.Close()
	ref, err := tx.PreparexContext(ctx, `INSERT OR IGNORE INTO chunk_refs (parent, child) VALUES (?, ?)`)
	if err != nil {
		return 0, nil, fmt.Errorf("put chunks: %w", err)
	}
	defer ref.Close()
	var (
		written int64
		parents []*carryover.ChunkInput
		now     = dbTime(dbNow())
	)
	for i := range chunks {
		c := &chunks[i]
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		// Look first: binding a multi-MiB blob only to have it ignored would copy it for nothing.
		if ok, err := chunkExists(ctx, exists, c.Hash); err != nil {
			return 0, nil, err
		} else if ok {
			continue
		}
		res, err := ins.ExecContext(ctx, c.Hash, c.Codec, c.RawLen, len(c.Data), now, c.Data)
		if err != nil {
			return 0, nil, fmt.Errorf("put chunk %s: %w", c.Hash, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // the same chunk twice in this call
		}
		written += int64(len(c.Data))
		for _, child := range c.Children {
			if _, err := ref.ExecContext(ctx, c.Hash, child); err != nil {
				return 0, nil, fmt.Errorf("put chunk %s: ref %s: %w", c.Hash, child, err)
			}
		}
		if len(c.Children) > 0 {
			parents = append(parents, c)
		}
	}
	return written, parents, nil
}

// checkChildren fails with ErrMissingChunk when a child of parents is not stored. The deferred foreign
// key would refuse a dangling child at COMMIT too; checking here names it.
func checkChildren(ctx context.Context, tx *sqlx.Tx, parents []*carryover.ChunkInput) error {
	if len(parents) == 0 {
		return nil
	}
	exists, err := tx.PreparexContext(ctx, `SELECT 1 FROM chunks WHERE hash = ?`)
	if err != nil {
		return fmt.Errorf("put chunks: %w", err)
	}
	defer exists.Close()
	for _, p := range parents {
		for _, child := range p.Children {
			if ok, err := chunkExists(ctx, exists, child); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("put chunk %s: child %s: %w", p.Hash, child, carryover.ErrMissingChunk)
			}
		}
	}
	return nil
}

// chunkExists runs a prepared "SELECT 1 FROM chunks WHERE hash = ?".
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

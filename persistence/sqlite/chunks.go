package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
		if err := insertEdges(ctx, tx, c.Hash, c.Children); err != nil {
			return 0, nil, err
		}
		if len(c.Children) > 0 {
			parents = append(parents, c)
		}
	}
	return written, parents, nil
}

// edgeBatch is the number of edges (or children looked up) per statement: a descriptor of a 1 GiB
// array lists ~1,000 chunks, and one statement per edge cost ~10 ms of cgo round trips per checkpoint.
const edgeBatch = 400

// insertEdges records parent -> child for each child, edgeBatch rows per statement.
func insertEdges(ctx context.Context, tx *sqlx.Tx, parent string, children []string) error {
	for len(children) > 0 {
		n := min(len(children), edgeBatch)
		args := make([]any, 0, 2*n)
		for _, child := range children[:n] {
			args = append(args, parent, child)
		}
		q := `INSERT OR IGNORE INTO chunk_refs (parent, child) VALUES (?, ?)` + strings.Repeat(", (?, ?)", n-1)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("put chunk %s: refs: %w", parent, err)
		}
		children = children[n:]
	}
	return nil
}

// checkChildren fails with ErrMissingChunk when a child of parents is not stored. It is the only check
// (chunk_refs has no foreign key on child since migration 0003), so no edge dangles. Children are counted
// edgeBatch at a time; only a batch that comes up short is looked at one by one, to name the missing.
func checkChildren(ctx context.Context, tx *sqlx.Tx, parents []*carryover.ChunkInput) error {
	for _, p := range parents {
		for kids := p.Children; len(kids) > 0; {
			n := min(len(kids), edgeBatch)
			batch := uniqueStrings(kids[:n])
			args := make([]any, len(batch))
			for i, h := range batch {
				args[i] = h
			}
			var found int
			q := `SELECT count(*) FROM chunks WHERE hash IN (?` + strings.Repeat(", ?", len(batch)-1) + `)`
			if err := tx.QueryRowContext(ctx, q, args...).Scan(&found); err != nil {
				return fmt.Errorf("put chunk %s: children: %w", p.Hash, err)
			}
			if found != len(batch) {
				return nameMissing(ctx, tx, p.Hash, batch)
			}
			kids = kids[n:]
		}
	}
	return nil
}

// nameMissing returns ErrMissingChunk naming the first of children that is not stored.
func nameMissing(ctx context.Context, tx *sqlx.Tx, parent string, children []string) error {
	exists, err := tx.PreparexContext(ctx, `SELECT 1 FROM chunks WHERE hash = ?`)
	if err != nil {
		return fmt.Errorf("put chunks: %w", err)
	}
	defer exists.Close()
	for _, child := range children {
		if ok, err := chunkExists(ctx, exists, child); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("put chunk %s: child %s: %w", parent, child, carryover.ErrMissingChunk)
		}
	}
	return fmt.Errorf("put chunk %s: a child went missing while checked: %w", parent, carryover.ErrMissingChunk)
}

func uniqueStrings(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
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

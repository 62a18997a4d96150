package sqlite

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// liveChunks is the mark phase of GC: every chunk reachable from a checkpoint root through chunk_refs.
// UNION (not UNION ALL) drops repeats, so shared sub-DAGs are walked once and the recursion ends.
const liveChunks = `WITH RECURSIVE live(hash) AS (
		SELECT hash FROM checkpoint_roots
		UNION
		SELECT r.child FROM chunk_refs r JOIN live l ON r.parent = l.hash
	)`

// GC deletes every chunk not reachable from any checkpoint root and returns how many chunks and stored
// bytes it freed. It takes ckmu exclusively, so it waits for every open CheckpointWriter, whose chunks
// may not be reachable yet (and new writers wait for it). Mark and sweep run in one transaction, and
// freed pages are then returned to the file system (incremental vacuum), so the database file shrinks.
func (s *Store) GC(ctx context.Context) (chunks int, bytes int64, err error) {
	s.ckmu.Lock()
	defer s.ckmu.Unlock()
	err = s.writeTx(ctx, func(tx *sqlx.Tx) error {
		rows, err := tx.QueryContext(ctx, liveChunks+`
			DELETE FROM chunks WHERE hash NOT IN (SELECT hash FROM live) RETURNING stored_len`)
		if err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		defer rows.Close()
		chunks, bytes = 0, 0
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				return fmt.Errorf("gc: %w", err)
			}
			chunks++
			bytes += n
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		return rows.Close()
	})
	if err != nil {
		return 0, 0, err
	}
	if chunks > 0 {
		if err := s.incrementalVacuum(ctx); err != nil {
			return chunks, bytes, fmt.Errorf("gc: incremental vacuum: %w", err)
		}
	}
	return chunks, bytes, nil
}

// incrementalVacuum returns the free pages to the file system. The pragma frees one page per step, so
// it is run as a query and drained: a plain Exec steps once and frees a single page.
func (s *Store) incrementalVacuum(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	rows, err := s.writerQuery(ctx, `PRAGMA incremental_vacuum`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

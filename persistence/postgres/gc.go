package postgres

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// liveChunks is the mark phase of GC: every chunk reachable through chunk_refs from a checkpoint root
// or from a pin of a checkpoint in progress. UNION drops repeats, so shared sub-DAGs are walked once.
const liveChunks = `WITH RECURSIVE live(hash) AS (
		SELECT hash FROM checkpoint_roots
		UNION
		SELECT hash FROM chunk_pins
		UNION
		SELECT r.child FROM chunk_refs r JOIN live l ON r.parent = l.hash
	)`

// GC deletes every chunk not reachable from a checkpoint root or a pin and returns how many chunks and
// stored bytes it freed. It holds the GC lock row FOR UPDATE, so one GC runs at a time across nodes
// and puts and commits wait for it (they hold the row FOR SHARE). Writers older than WriterMaxAge
// (their node died before closing them) are dropped first, with their pins.
func (s *Store) GC(ctx context.Context) (chunks int, bytes int64, err error) {
	err = s.tx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM gc_lock WHERE id = 1 FOR UPDATE`); err != nil {
			return fmt.Errorf("gc: lock: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM writers WHERE started_at < now() - make_interval(secs => $1)`,
			s.opts.WriterMaxAge.Seconds()); err != nil {
			return fmt.Errorf("gc: stale writers: %w", err)
		}
		return tx.QueryRowContext(ctx, liveChunks+`,
			gone AS (DELETE FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM live WHERE live.hash = c.hash) RETURNING stored_len)
			SELECT COUNT(*), COALESCE(SUM(stored_len), 0) FROM gone`).Scan(&chunks, &bytes)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	return chunks, bytes, nil
}

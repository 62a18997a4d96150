package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

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
//
// The objects of collected chunks are not deleted at once: the sweep leaves a tombstone per object
// no remaining chunk names (a pack goes with the last of its chunks: the statement's snapshot still
// sees the rows it deletes, hence the look-up in gone), and a later GC deletes the objects whose tombstone is older than TombstoneGrace. Objects no catalog
// row or tombstone names and older than OrphanAge (uploads whose transaction never committed) go too.
func (s *Store) GC(ctx context.Context) (chunks int, bytes int64, err error) {
	err = s.tx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM gc_lock WHERE id = 1 FOR UPDATE`); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM writers WHERE started_at < now() - make_interval(secs => $1)`,
			s.opts.WriterMaxAge.Seconds()); err != nil {
			return fmt.Errorf("stale writers: %w", err)
		}
		return tx.QueryRowContext(ctx, liveChunks+`,
			gone AS (DELETE FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM live WHERE live.hash = c.hash)
				RETURNING hash, stored_len, object_key),
			tomb AS (INSERT INTO object_tombstones (key) SELECT DISTINCT g.object_key FROM gone g
				WHERE g.object_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chunks c
					WHERE c.object_key = g.object_key AND NOT EXISTS (SELECT 1 FROM gone o WHERE o.hash = c.hash))
				ON CONFLICT DO NOTHING)
			SELECT COUNT(*), COALESCE(SUM(stored_len), 0) FROM gone`).Scan(&chunks, &bytes)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("gc: %w", err)
	}
	if s.opts.Objects != nil {
		if err := s.deleteTombstoned(ctx); err != nil {
			return chunks, bytes, fmt.Errorf("gc: %w", err)
		}
		if err := s.sweepOrphans(ctx); err != nil {
			return chunks, bytes, fmt.Errorf("gc: %w", err)
		}
	}
	return chunks, bytes, nil
}

// deleteTombstoned deletes the objects whose tombstone is past the grace period, then the tombstones.
func (s *Store) deleteTombstoned(ctx context.Context) error {
	var keys []string
	if err := s.sel(ctx, &keys, `SELECT key FROM object_tombstones
		WHERE deleted_at < now() - make_interval(secs => $1) LIMIT 1000`, s.opts.TombstoneGrace.Seconds()); err != nil {
		return fmt.Errorf("tombstones: %w", err)
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.opts.Objects.Delete(ctx, keys); err != nil {
		return err
	}
	if _, err := s.execSame(ctx, `DELETE FROM object_tombstones WHERE key = ANY($1::text[])`, keys); err != nil {
		return fmt.Errorf("tombstones: %w", err)
	}
	return nil
}

// sweepOrphans deletes objects under the prefix, older than OrphanAge, that neither a chunk nor a
// tombstone names. An upload younger than that may still be on its way into the catalog.
func (s *Store) sweepOrphans(ctx context.Context) error {
	cutoff := time.Now().Add(-s.opts.OrphanAge)
	var old []string
	err := s.opts.Objects.List(ctx, s.opts.ObjectPrefix, func(key string, modified time.Time) error {
		if modified.Before(cutoff) && strings.HasPrefix(key, s.opts.ObjectPrefix) {
			old = append(old, key)
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return err
	}
	var named []string
	if err := s.sel(ctx, &named, `SELECT object_key FROM chunks WHERE object_key = ANY($1::text[])
		UNION SELECT key FROM object_tombstones WHERE key = ANY($1::text[])`, old); err != nil {
		return fmt.Errorf("orphans: %w", err)
	}
	keep := map[string]bool{}
	for _, k := range named {
		keep[k] = true
	}
	var orphans []string
	for _, k := range old {
		if !keep[k] {
			orphans = append(orphans, k)
		}
	}
	return s.opts.Objects.Delete(ctx, orphans)
}

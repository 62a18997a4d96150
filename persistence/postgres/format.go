package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/jmoiron/sqlx"

	"github.com/carryover/carryover/persistence/format"
)

// MaxFormat is the newest checkpoint format this node reads and announces: format.Newest, unless
// Options.MaxFormat (a test hook) says otherwise (persistence.FormatStore).
func (s *Store) MaxFormat() int {
	if s.opts.MaxFormat > 0 {
		return s.opts.MaxFormat
	}
	return format.Newest
}

// checkSchema refuses a database migrated by a newer carryover, before this binary's migrations
// run (format.CheckSchema).
func (s *Store) checkSchema(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	known := make([]string, len(names))
	for i, n := range names {
		known[i] = path.Base(n)
	}
	var recorded []string
	if err := s.sel(ctx, &recorded, `SELECT name FROM schema_migrations`); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	for i, r := range recorded {
		recorded[i] = path.Base(r)
	}
	return format.CheckSchema("the PostgreSQL store", known, recorded)
}

// storeFormat is the highest checkpoint format ever in force in the store (0: none recorded).
func (s *Store) storeFormat(ctx context.Context) (int, error) {
	var v int
	err := s.get(ctx, &v, `SELECT value FROM store_meta WHERE name = 'format'`)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the store's format: %w", err)
	}
	return v, nil
}

// checkFormat refuses to open a store that a newer cluster already writes in a format this node
// cannot read.
func (s *Store) checkFormat(ctx context.Context) error {
	v, err := s.storeFormat(ctx)
	if err != nil {
		return err
	}
	if v > s.MaxFormat() {
		return format.NewerStore("the PostgreSQL store", v, s.MaxFormat())
	}
	return nil
}

// formatLock is the PostgreSQL advisory lock (an arbitrary constant key) that orders a node's
// heartbeat against the cluster's format switch: a heartbeat holds it shared while it checks the
// store's format and renews the node's row; the switch holds it exclusively while it finds the
// live nodes' lowest format and records it. So an old node that joins as the last old node leaves
// is either seen by the switch (which then does not happen) or sees the switch (and is refused):
// never a live old node beside a cluster writing a format it cannot read.
const formatLock = 0x636f_666d_7400 // "cofmt"

// lowestFormat is the lowest max_format of the live nodes, capped at this node's own. A store
// opened without a node id counts the live nodes too: on a database that a cluster uses, it must
// not switch the format under them.
func (s *Store) lowestFormat(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	f := s.MaxFormat()
	var low sql.NullInt64
	if err := sqlx.GetContext(ctx, q, &low, `SELECT min(n.max_format) FROM nodes n WHERE `+aliveSQL); err != nil {
		return 0, fmt.Errorf("the cluster's format: %w", err)
	}
	if low.Valid && int(low.Int64) < f {
		f = int(low.Int64)
	}
	return f, nil
}

// WriteFormat is the checkpoint format this node writes now: the lowest max_format of the live
// nodes (its own included), so every node can read what any node writes. A rolling upgrade
// therefore keeps writing the old format until the last old node has left, and then switches;
// the switch is recorded in store_meta, after which an old node refuses to start (checkFormat)
// and an old node still running fails its heartbeat (Heartbeat). A single node (no cluster)
// writes its own newest format. The result is what Format returns until the next call.
func (s *Store) WriteFormat(ctx context.Context) (int, error) {
	var f int
	err := s.read(ctx, func() (err error) { f, err = s.lowestFormat(ctx, s.db); return err })
	if err != nil {
		return 0, err
	}
	if int64(f) > s.recordedFormat.Load() { // one locked write per switch, not per heartbeat
		err := s.tx(ctx, func(tx *sqlx.Tx) error {
			// Heartbeats queue behind this exclusive request: it waits at most a second (the next
			// heartbeat tries again), not for as long as a node holding the lock shared is stalled.
			if _, err := tx.ExecContext(ctx, `SELECT set_config('lock_timeout', '1s', true)`); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, formatLock); err != nil {
				return err
			}
			// Again under the lock: a node whose heartbeat committed meanwhile counts.
			low, err := s.lowestFormat(ctx, tx)
			if err != nil {
				return err
			}
			f = low
			_, err = tx.ExecContext(ctx, `INSERT INTO store_meta (name, value) VALUES ('format', $1)
				ON CONFLICT (name) DO UPDATE SET value = GREATEST(store_meta.value, excluded.value)`, f)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("record the store's format: %w", err)
		}
		s.recordedFormat.Store(int64(f))
	}
	s.writeFormat.Store(int64(f))
	return f, nil
}

// Format is the checkpoint format this node writes, as of its last heartbeat (format.Oldest
// before the first): the Checkpointer stamps it on every manifest (persistence.FormatStore).
func (s *Store) Format() int {
	if f := s.writeFormat.Load(); f > 0 {
		return int(f)
	}
	return format.Oldest
}

package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/carryover/carryover/persistence/format"
)

// maxFormat is the newest checkpoint format this node reads and announces: format.Newest, unless
// Options.MaxFormat (a test hook) says otherwise.
func (s *Store) maxFormat() int {
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
	if err := s.db.SelectContext(ctx, &recorded, `SELECT name FROM schema_migrations`); err != nil {
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
	err := s.db.GetContext(ctx, &v, `SELECT value FROM store_meta WHERE name = 'format'`)
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
	if v > s.maxFormat() {
		return format.NewerStore("the PostgreSQL store", v, s.maxFormat())
	}
	return nil
}

// WriteFormat is the checkpoint format this node writes now: the lowest max_format of the live
// nodes (its own included), so every node can read what any node writes. A rolling upgrade
// therefore keeps writing the old format until the last old node has left, and then switches;
// the switch is recorded in store_meta, after which an old node refuses to start (checkFormat).
// A single node (no cluster) writes its own newest format.
func (s *Store) WriteFormat(ctx context.Context) (int, error) {
	f := s.maxFormat()
	if s.clustered() {
		var low sql.NullInt64
		if err := s.db.GetContext(ctx, &low, `SELECT min(n.max_format) FROM nodes n WHERE `+aliveSQL); err != nil {
			return 0, fmt.Errorf("the cluster's format: %w", err)
		}
		if low.Valid && int(low.Int64) < f {
			f = int(low.Int64)
		}
	}
	if int64(f) > s.recordedFormat.Load() { // one write per switch, not per heartbeat
		_, err := s.db.ExecContext(ctx, `INSERT INTO store_meta (name, value) VALUES ('format', $1)
			ON CONFLICT (name) DO UPDATE SET value = GREATEST(store_meta.value, excluded.value)`, f)
		if err != nil {
			return 0, fmt.Errorf("record the store's format: %w", err)
		}
		s.recordedFormat.Store(int64(f))
	}
	s.writeFormat.Store(int64(f))
	return f, nil
}

// Format is the checkpoint format this node writes, as of its last heartbeat (format.Oldest
// before the first). The checkpoint writer stamps it on what it writes once a second format
// exists: today every node reads and writes format 1.
func (s *Store) Format() int {
	if f := s.writeFormat.Load(); f > 0 {
		return int(f)
	}
	return format.Oldest
}

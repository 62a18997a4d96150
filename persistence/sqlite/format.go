package sqlite

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

// checkSchema refuses a database migrated by a newer carryover (format.CheckSchema), before this
// binary's migrations touch it.
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
	return format.CheckSchema(s.path, known, recorded)
}

// checkFormat refuses a store whose recorded checkpoint format is newer than this binary reads,
// then records format.Newest (a single node writes its newest format).
func (s *Store) checkFormat(ctx context.Context) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		var v int
		err := tx.GetContext(ctx, &v, `SELECT value FROM store_meta WHERE name = 'format'`)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read the store's format: %w", err)
		case v > format.Newest:
			return format.NewerStore(s.path, v, format.Newest)
		case v == format.Newest:
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO store_meta (name, value) VALUES ('format', ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, format.Newest)
		return err
	})
}

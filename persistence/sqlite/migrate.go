package sqlite

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jmoiron/sqlx"
)

// migrations holds the schema as numbered SQL files; they are applied in name order, once each, and
// recorded in schema_migrations, so a database created by an older binary is upgraded in place.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrate applies every migration not yet recorded, each in its own transaction together with its
// schema_migrations row, so a crash leaves the schema at a whole migration.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name       TEXT PRIMARY KEY,
		applied_at TIMESTAMP NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	if err := s.checkSchema(ctx); err != nil {
		return err
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := fs.ReadFile(migrations, name)
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		err = s.writeTx(ctx, func(tx *sqlx.Tx) error {
			var n int
			if err := tx.GetContext(ctx, &n, `SELECT COUNT(*) FROM schema_migrations WHERE name = ?`, name); err != nil {
				return fmt.Errorf("check %s: %w", name, err)
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("apply %s: %w", name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)`, name, dbTime(dbNow())); err != nil {
				return fmt.Errorf("record %s: %w", name, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

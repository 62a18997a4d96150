package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"github.com/jmoiron/sqlx"
)

// migrations holds the schema as numbered SQL files, applied in name order, once each, recorded in
// schema_migrations.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrate applies every migration not yet recorded, each in one transaction with its record. Nodes
// starting at once take turns on an exclusive lock of schema_migrations (a table lock, released with
// its transaction), so a migration runs once.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.execSame(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		name       TEXT PRIMARY KEY,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
	)`); err != nil && !isCode(err, uniqueViolation) { // two nodes creating it at once: one wins
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
		err = s.tx(ctx, func(tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, `LOCK TABLE schema_migrations IN EXCLUSIVE MODE`); err != nil {
				return fmt.Errorf("lock schema_migrations: %w", err)
			}
			var n int
			if err := tx.GetContext(ctx, &n, `SELECT COUNT(*) FROM schema_migrations WHERE name = $1`, name); err != nil {
				return fmt.Errorf("check %s: %w", name, err)
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("apply %s: %w", name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name) VALUES ($1)`, name); err != nil {
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

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/carryover/carryover"
)

// keyRow is an api_keys row; the scope and times are converted by key().
type keyRow struct {
	ID         string     `db:"id"`
	Tenant     string     `db:"tenant"`
	Name       string     `db:"name"`
	Scope      string     `db:"scope"`
	Prefix     string     `db:"prefix"`
	Hash       string     `db:"hash"`
	CreatedAt  time.Time  `db:"created_at"`
	ExpiresAt  *time.Time `db:"expires_at"`
	LastUsedAt *time.Time `db:"last_used_at"`
}

func (r keyRow) key() carryover.APIKey {
	return carryover.APIKey{ID: r.ID, Tenant: r.Tenant, Name: r.Name, Scope: carryover.Scope(r.Scope), Prefix: r.Prefix,
		Hash: r.Hash, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: utcPtr(r.ExpiresAt), LastUsedAt: utcPtr(r.LastUsedAt)}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return dbTime(*t)
}

const keyColumns = `id, tenant, name, scope, prefix, hash, created_at, expires_at, last_used_at`

// CreateKey stores k; CodeConflict if its id or hash is taken.
func (s *Store) CreateKey(ctx context.Context, k carryover.APIKey) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Tenant, k.Name, string(k.Scope), k.Prefix, k.Hash, dbTime(k.CreatedAt), nullTime(k.ExpiresAt), nullTime(k.LastUsedAt))
		switch {
		case isConstraint(err, sqlite3.ErrConstraintPrimaryKey), isConstraint(err, sqlite3.ErrConstraintUnique):
			return carryover.Errorf(carryover.CodeConflict, "key %q already exists", k.ID).WithDetails("key_id", k.ID)
		case err != nil:
			return fmt.Errorf("create key %q: %w", k.ID, err)
		}
		return nil
	})
}

// KeyByHash returns the key whose secret hashes to hash; CodeNotFound if there is none.
func (s *Store) KeyByHash(ctx context.Context, hash string) (carryover.APIKey, error) {
	var r keyRow
	err := s.db.GetContext(ctx, &r, `SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`, hash)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.APIKey{}, carryover.Errorf(carryover.CodeNotFound, "no such key")
	}
	if err != nil {
		return carryover.APIKey{}, fmt.Errorf("find key: %w", err)
	}
	return r.key(), nil
}

// ListKeys returns the keys of tenant ("" for every tenant), oldest first.
func (s *Store) ListKeys(ctx context.Context, tenant string) ([]carryover.APIKey, error) {
	var rows []keyRow
	err := s.db.SelectContext(ctx, &rows, `SELECT `+keyColumns+` FROM api_keys
		WHERE ? = '' OR tenant = ? ORDER BY created_at, id`, tenant, tenant)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := make([]carryover.APIKey, len(rows))
	for i, r := range rows {
		out[i] = r.key()
	}
	return out, nil
}

// DeleteKey removes a key; CodeNotFound if there is none.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete key %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return carryover.Errorf(carryover.CodeNotFound, "key %q not found", id).WithDetails("key_id", id)
		}
		return nil
	})
}

// TouchKey sets the key's last use.
func (s *Store) TouchKey(ctx context.Context, id string, at time.Time) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ?`, dbTime(at), id); err != nil {
			return fmt.Errorf("touch key %q: %w", id, err)
		}
		return nil
	})
}

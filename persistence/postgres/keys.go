package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
)

// API keys are tenant-wide, not a session's: their writes are not fenced by session ownership.

// keyRow is an api_keys row; times are Unix nanoseconds.
type keyRow struct {
	ID         string `db:"id"`
	Tenant     string `db:"tenant"`
	Name       string `db:"name"`
	Scope      string `db:"scope"`
	Prefix     string `db:"prefix"`
	Hash       string `db:"hash"`
	CreatedAt  int64  `db:"created_at"`
	ExpiresAt  *int64 `db:"expires_at"`
	LastUsedAt *int64 `db:"last_used_at"`
}

func (r keyRow) key() carryover.APIKey {
	return carryover.APIKey{ID: r.ID, Tenant: r.Tenant, Name: r.Name, Scope: carryover.Scope(r.Scope), Prefix: r.Prefix,
		Hash: r.Hash, CreatedAt: timeOf(r.CreatedAt), ExpiresAt: timePtr(r.ExpiresAt), LastUsedAt: timePtr(r.LastUsedAt)}
}

func timePtr(ns *int64) *time.Time {
	if ns == nil {
		return nil
	}
	t := timeOf(*ns)
	return &t
}

func nanosPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

const keyColumns = `id, tenant, name, scope, prefix, hash, created_at, expires_at, last_used_at`

// CreateKey stores k; CodeConflict if its id or hash is taken.
func (s *Store) CreateKey(ctx context.Context, k carryover.APIKey) error {
	created := k.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		k.ID, k.Tenant, k.Name, string(k.Scope), k.Prefix, k.Hash, created.UnixNano(), nanosPtr(k.ExpiresAt), nanosPtr(k.LastUsedAt))
	switch {
	case isCode(err, uniqueViolation):
		return carryover.Errorf(carryover.CodeConflict, "key %q already exists", k.ID).WithDetails("key_id", k.ID)
	case err != nil:
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	return nil
}

// KeyByHash returns the key whose secret hashes to hash; CodeNotFound if there is none.
func (s *Store) KeyByHash(ctx context.Context, hash string) (carryover.APIKey, error) {
	var r keyRow
	err := s.get(ctx, &r, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, hash)
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
	err := s.sel(ctx, &rows, `SELECT `+keyColumns+` FROM api_keys
		WHERE $1 = '' OR tenant = $1 ORDER BY created_at, id COLLATE "C"`, tenant)
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
	res, err := s.db.ExecContext(ctx, `DELETE FROM api_keys WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete key %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return carryover.Errorf(carryover.CodeNotFound, "key %q not found", id).WithDetails("key_id", id)
	}
	return nil
}

// TouchKey sets the key's last use.
func (s *Store) TouchKey(ctx context.Context, id string, at time.Time) error {
	if _, err := s.execSame(ctx, `UPDATE api_keys SET last_used_at = $1 WHERE id = $2`, at.UnixNano(), id); err != nil {
		return fmt.Errorf("touch key %q: %w", id, err)
	}
	return nil
}

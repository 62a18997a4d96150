package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// keyTable is one table of idempotency keys: a session's turns (idempotency_keys, scoped by
// session_id) or a tenant's POST /api/execute runs (ephemeral_idempotency_keys, scoped by tenant).
// Both hold the same record, so one set of statements serves both; only the scope differs.
type keyTable struct {
	table string // the table's name
	scope string // the column that scopes a key: session_id or tenant
	noun  string // what the scope is, for errors: "session" or "tenant"
	// columns reads a row as an idempotencyRow (a tenant's keys have no session_id).
	columns string
}

var (
	sessionKeys = keyTable{"idempotency_keys", "session_id", "session",
		`session_id, key, fingerprint, attempt, state, CAST(answer AS BLOB) AS answer, created_at, expires_at`}
	tenantKeys = keyTable{"ephemeral_idempotency_keys", "tenant", "tenant",
		`'' AS session_id, key, fingerprint, attempt, state, CAST(answer AS BLOB) AS answer, created_at, expires_at`}
)

// reserve records r as pending under scope unless the scope holds the key unexpired (then that
// record and false). One write transaction: SQLite's single writer makes concurrent reservations
// take turns, so exactly one inserts.
func (t keyTable) reserve(ctx context.Context, s *Store, scope string, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = dbNow()
	}
	var held carryover.IdempotencyRecord
	won := false
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		var row idempotencyRow
		err := tx.GetContext(ctx, &row, `SELECT `+t.columns+` FROM `+t.table+` WHERE `+t.scope+` = ? AND key = ?`, scope, r.Key)
		switch {
		case err == nil && !row.Expired(r.CreatedAt):
			held = row.record()
			return nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read idempotency key of %s %q: %w", t.noun, scope, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO `+t.table+`
			(`+t.scope+`, key, fingerprint, attempt, state, answer, created_at, expires_at) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)`,
			scope, r.Key, r.Fingerprint, r.Attempt, carryover.IdempotencyPending, dbTime(r.CreatedAt), dbTime(r.ExpiresAt))
		if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return carryover.Errorf(carryover.CodeNotFound, "%s %q not found", t.noun, scope)
		}
		if err != nil {
			return fmt.Errorf("reserve idempotency key of %s %q: %w", t.noun, scope, err)
		}
		won = true
		return nil
	})
	if err != nil {
		return carryover.IdempotencyRecord{}, false, err
	}
	if won {
		r.State, r.Answer = carryover.IdempotencyPending, nil
		return r, true, nil
	}
	return held, false, nil
}

// finish stores the answer of a key attempt holds.
func (t keyTable) finish(ctx context.Context, s *Store, scope, key, attempt string, answer json.RawMessage) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE `+t.table+` SET state = ?, answer = ? WHERE `+t.scope+` = ? AND key = ? AND attempt = ?`,
			carryover.IdempotencyDone, jsonText(answer, "null"), scope, key, attempt)
		if err != nil {
			return fmt.Errorf("store the answer of an idempotency key of %s %q: %w", t.noun, scope, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return carryover.Errorf(carryover.CodeNotFound, "idempotency key %q of %s %q not found", key, t.noun, scope)
		}
		return nil
	})
}

// release deletes a key attempt holds whose turn or run never started.
func (t keyTable) release(ctx context.Context, s *Store, scope, key, attempt string) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE `+t.scope+` = ? AND key = ? AND attempt = ?`,
			scope, key, attempt); err != nil {
			return fmt.Errorf("release idempotency key of %s %q: %w", t.noun, scope, err)
		}
		return nil
	})
}

// expire deletes the records expired at now.
func (t keyTable) expire(ctx context.Context, s *Store, now time.Time) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE expires_at <= ?`, dbTime(now))
		if err != nil {
			return fmt.Errorf("expire keys of %s: %w", t.table, err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}

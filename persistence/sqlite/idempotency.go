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

// idempotencyRow is a row of idempotency_keys; answer is NULL while pending.
type idempotencyRow struct {
	carryover.IdempotencyRecord
	Answer sql.NullString `db:"answer"`
}

func (r idempotencyRow) record() carryover.IdempotencyRecord {
	out := r.IdempotencyRecord
	out.Answer = nil
	if r.Answer.Valid {
		out.Answer = json.RawMessage(r.Answer.String)
	}
	return out
}

const idempotencyColumns = `session_id, key, fingerprint, attempt, state, CAST(answer AS BLOB) AS answer, created_at, expires_at`

// ReserveIdempotencyKey records r as pending unless the session holds the key unexpired (then that
// record and false). One write transaction: SQLite's single writer makes concurrent reservations
// take turns, so exactly one inserts.
func (s *Store) ReserveIdempotencyKey(ctx context.Context, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = dbNow()
	}
	var held carryover.IdempotencyRecord
	won := false
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		var row idempotencyRow
		err := tx.GetContext(ctx, &row, `SELECT `+idempotencyColumns+` FROM idempotency_keys WHERE session_id = ? AND key = ?`, r.SessionID, r.Key)
		switch {
		case err == nil && !row.Expired(r.CreatedAt):
			held = row.record()
			return nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read idempotency key of session %q: %w", r.SessionID, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO idempotency_keys
			(session_id, key, fingerprint, attempt, state, answer, created_at, expires_at) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)`,
			r.SessionID, r.Key, r.Fingerprint, r.Attempt, carryover.IdempotencyPending, dbTime(r.CreatedAt), dbTime(r.ExpiresAt))
		if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return carryover.Errorf(carryover.CodeNotFound, "session %q not found", r.SessionID)
		}
		if err != nil {
			return fmt.Errorf("reserve idempotency key of session %q: %w", r.SessionID, err)
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

// FinishIdempotencyKey stores the answer of a key attempt holds.
func (s *Store) FinishIdempotencyKey(ctx context.Context, sessionID, key, attempt string, answer json.RawMessage) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET state = ?, answer = ? WHERE session_id = ? AND key = ? AND attempt = ?`,
			carryover.IdempotencyDone, jsonText(answer, "null"), sessionID, key, attempt)
		if err != nil {
			return fmt.Errorf("store the answer of an idempotency key of session %q: %w", sessionID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return carryover.Errorf(carryover.CodeNotFound, "idempotency key %q of session %q not found", key, sessionID)
		}
		return nil
	})
}

// ReleaseIdempotencyKey deletes a key attempt holds whose turn never started.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, sessionID, key, attempt string) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE session_id = ? AND key = ? AND attempt = ?`,
			sessionID, key, attempt); err != nil {
			return fmt.Errorf("release idempotency key of session %q: %w", sessionID, err)
		}
		return nil
	})
}

// GetIdempotencyKey returns the record of a key.
func (s *Store) GetIdempotencyKey(ctx context.Context, sessionID, key string) (carryover.IdempotencyRecord, error) {
	var row idempotencyRow
	err := s.db.GetContext(ctx, &row, `SELECT `+idempotencyColumns+` FROM idempotency_keys WHERE session_id = ? AND key = ?`, sessionID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.IdempotencyRecord{}, carryover.Errorf(carryover.CodeNotFound, "idempotency key %q of session %q not found", key, sessionID)
	}
	if err != nil {
		return carryover.IdempotencyRecord{}, fmt.Errorf("get idempotency key of session %q: %w", sessionID, err)
	}
	return row.record(), nil
}

// ExpireIdempotencyKeys deletes the records expired at now.
func (s *Store) ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, dbTime(now))
		if err != nil {
			return fmt.Errorf("expire idempotency keys: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}

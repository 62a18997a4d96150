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
)

// ephemeralColumns reads a row of ephemeral_idempotency_keys as an idempotencyRow (session_id empty).
const ephemeralColumns = `'' AS session_id, key, fingerprint, attempt, state, CAST(answer AS BLOB) AS answer, created_at, expires_at`

// ReserveEphemeralKey records r as pending under tenant unless the tenant holds the key unexpired
// (then that record and false). One write transaction: reservations take turns.
func (s *Store) ReserveEphemeralKey(ctx context.Context, tenant string, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = dbNow()
	}
	r.SessionID = ""
	var held carryover.IdempotencyRecord
	won := false
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		var row idempotencyRow
		err := tx.GetContext(ctx, &row, `SELECT `+ephemeralColumns+` FROM ephemeral_idempotency_keys WHERE tenant = ? AND key = ?`, tenant, r.Key)
		switch {
		case err == nil && !row.Expired(r.CreatedAt):
			held = row.record()
			return nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("read idempotency key of tenant %q: %w", tenant, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO ephemeral_idempotency_keys
			(tenant, key, fingerprint, attempt, state, answer, created_at, expires_at) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)`,
			tenant, r.Key, r.Fingerprint, r.Attempt, carryover.IdempotencyPending, dbTime(r.CreatedAt), dbTime(r.ExpiresAt)); err != nil {
			return fmt.Errorf("reserve idempotency key of tenant %q: %w", tenant, err)
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

// FinishEphemeralKey stores the answer of a key attempt holds.
func (s *Store) FinishEphemeralKey(ctx context.Context, tenant, key, attempt string, answer json.RawMessage) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE ephemeral_idempotency_keys SET state = ?, answer = ? WHERE tenant = ? AND key = ? AND attempt = ?`,
			carryover.IdempotencyDone, jsonText(answer, "null"), tenant, key, attempt)
		if err != nil {
			return fmt.Errorf("store the answer of an idempotency key of tenant %q: %w", tenant, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return carryover.Errorf(carryover.CodeNotFound, "idempotency key %q of tenant %q not found", key, tenant)
		}
		return nil
	})
}

// ReleaseEphemeralKey deletes a key attempt holds whose run never started.
func (s *Store) ReleaseEphemeralKey(ctx context.Context, tenant, key, attempt string) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ephemeral_idempotency_keys WHERE tenant = ? AND key = ? AND attempt = ?`,
			tenant, key, attempt); err != nil {
			return fmt.Errorf("release idempotency key of tenant %q: %w", tenant, err)
		}
		return nil
	})
}

// ExpireEphemeralKeys deletes the records expired at now.
func (s *Store) ExpireEphemeralKeys(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ephemeral_idempotency_keys WHERE expires_at <= ?`, dbTime(now))
		if err != nil {
			return fmt.Errorf("expire idempotency keys of /api/execute: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}

package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

// ephemeralColumns reads a row of ephemeral_idempotency_keys as an idempotencyRow (session_id empty).
const ephemeralColumns = `'' AS session_id, key, fingerprint, attempt, state, answer, created_at, expires_at`

// ReserveEphemeralKey records r as pending under tenant unless the tenant holds the key unexpired
// (then that record and false). The insert's ON CONFLICT makes concurrent reservations (on any
// node) queue on the row: the first inserts, the others find it. Not fenced: no session owns it.
func (s *Store) ReserveEphemeralKey(ctx context.Context, tenant string, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	r.SessionID = ""
	var held carryover.IdempotencyRecord
	won := false
	err := s.tx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO ephemeral_idempotency_keys AS k
			(tenant, key, fingerprint, attempt, state, answer, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, NULL, $6, $7)
			ON CONFLICT (tenant, key) DO UPDATE SET fingerprint = excluded.fingerprint, attempt = excluded.attempt,
				state = excluded.state, answer = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at
			WHERE k.expires_at <= excluded.created_at`,
			tenant, r.Key, r.Fingerprint, r.Attempt, carryover.IdempotencyPending, nsOf(r.CreatedAt), nsOf(r.ExpiresAt))
		if err != nil {
			return fmt.Errorf("reserve idempotency key of tenant %q: %w", tenant, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			won = true
			return nil
		}
		var row idempotencyRow
		if err := tx.GetContext(ctx, &row, `SELECT `+ephemeralColumns+` FROM ephemeral_idempotency_keys WHERE tenant = $1 AND key = $2`, tenant, r.Key); err != nil {
			return fmt.Errorf("read idempotency key of tenant %q: %w", tenant, err)
		}
		held = row.record()
		return nil
	})
	if err != nil {
		return carryover.IdempotencyRecord{}, false, err
	}
	if won {
		r.State, r.Answer = carryover.IdempotencyPending, nil
		r.CreatedAt, r.ExpiresAt = timeOf(nsOf(r.CreatedAt)), timeOf(nsOf(r.ExpiresAt))
		return r, true, nil
	}
	return held, false, nil
}

// FinishEphemeralKey stores the answer of a key attempt holds.
func (s *Store) FinishEphemeralKey(ctx context.Context, tenant, key, attempt string, answer json.RawMessage) error {
	res, err := s.db.ExecContext(ctx, `UPDATE ephemeral_idempotency_keys SET state = $1, answer = $2 WHERE tenant = $3 AND key = $4 AND attempt = $5`,
		carryover.IdempotencyDone, jsonText(answer, "null"), tenant, key, attempt)
	if err != nil {
		return fmt.Errorf("store the answer of an idempotency key of tenant %q: %w", tenant, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return carryover.Errorf(carryover.CodeNotFound, "idempotency key %q of tenant %q not found", key, tenant)
	}
	return nil
}

// ReleaseEphemeralKey deletes a key attempt holds whose run never started.
func (s *Store) ReleaseEphemeralKey(ctx context.Context, tenant, key, attempt string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM ephemeral_idempotency_keys WHERE tenant = $1 AND key = $2 AND attempt = $3`,
		tenant, key, attempt); err != nil {
		return fmt.Errorf("release idempotency key of tenant %q: %w", tenant, err)
	}
	return nil
}

// ExpireEphemeralKeys deletes the records expired at now.
func (s *Store) ExpireEphemeralKeys(ctx context.Context, now time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM ephemeral_idempotency_keys WHERE expires_at <= $1`, nsOf(now))
	if err != nil {
		return 0, fmt.Errorf("expire idempotency keys of /api/execute: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

package postgres

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

// idempotencyRow is a row of idempotency_keys: times in ns, answer NULL while pending.
type idempotencyRow struct {
	SessionID   string         `db:"session_id"`
	Key         string         `db:"key"`
	Fingerprint string         `db:"fingerprint"`
	Attempt     string         `db:"attempt"`
	State       string         `db:"state"`
	Answer      sql.NullString `db:"answer"`
	CreatedAt   int64          `db:"created_at"`
	ExpiresAt   int64          `db:"expires_at"`
}

func (r idempotencyRow) record() carryover.IdempotencyRecord {
	out := carryover.IdempotencyRecord{SessionID: r.SessionID, Key: r.Key, Fingerprint: r.Fingerprint, Attempt: r.Attempt,
		State: r.State, CreatedAt: timeOf(r.CreatedAt), ExpiresAt: timeOf(r.ExpiresAt)}
	if r.Answer.Valid {
		out.Answer = json.RawMessage(r.Answer.String)
	}
	return out
}

const idempotencyColumns = `session_id, key, fingerprint, attempt, state, answer, created_at, expires_at`

// ReserveIdempotencyKey records r as pending unless the session holds the key unexpired (then that
// record and false). The insert's ON CONFLICT makes concurrent reservations (on any node) queue on
// the row: the first inserts, the others find it. Fenced: only the session's owner reserves.
func (s *Store) ReserveIdempotencyKey(ctx context.Context, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	var held carryover.IdempotencyRecord
	won := false
	err := s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := s.lockFenced(ctx, tx, r.SessionID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys AS k
			(session_id, key, fingerprint, attempt, state, answer, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, NULL, $6, $7)
			ON CONFLICT (session_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, attempt = excluded.attempt,
				state = excluded.state, answer = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at
			WHERE k.expires_at <= excluded.created_at`,
			r.SessionID, r.Key, r.Fingerprint, r.Attempt, carryover.IdempotencyPending, nsOf(r.CreatedAt), nsOf(r.ExpiresAt))
		if err != nil {
			return fmt.Errorf("reserve idempotency key of session %q: %w", r.SessionID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			won = true
			return nil
		}
		var row idempotencyRow
		if err := tx.GetContext(ctx, &row, `SELECT `+idempotencyColumns+` FROM idempotency_keys WHERE session_id = $1 AND key = $2`, r.SessionID, r.Key); err != nil {
			return fmt.Errorf("read idempotency key of session %q: %w", r.SessionID, err)
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

// FinishIdempotencyKey stores the answer of a held key. Fenced: a node that lost the session leaves
// the key pending (a retry then answers run_interrupted).
func (s *Store) FinishIdempotencyKey(ctx context.Context, sessionID, key, attempt string, answer json.RawMessage) error {
	return s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := s.lockFenced(ctx, tx, sessionID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET state = $1, answer = $2 WHERE session_id = $3 AND key = $4 AND attempt = $5`,
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

// ReleaseIdempotencyKey deletes a key attempt holds whose turn never started. Matching the attempt,
// not fencing, is what makes it safe: a node that lost the session never reserved the key anew
// under the new owner's attempt.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, sessionID, key, attempt string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE session_id = $1 AND key = $2 AND attempt = $3`,
		sessionID, key, attempt); err != nil {
		return fmt.Errorf("release idempotency key of session %q: %w", sessionID, err)
	}
	return nil
}

// GetIdempotencyKey returns the record of a key.
func (s *Store) GetIdempotencyKey(ctx context.Context, sessionID, key string) (carryover.IdempotencyRecord, error) {
	var row idempotencyRow
	err := s.db.GetContext(ctx, &row, `SELECT `+idempotencyColumns+` FROM idempotency_keys WHERE session_id = $1 AND key = $2`, sessionID, key)
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
	res, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, nsOf(now))
	if err != nil {
		return 0, fmt.Errorf("expire idempotency keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

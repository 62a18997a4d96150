package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
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

// ReserveIdempotencyKey records r as pending unless the session holds the key unexpired (then that
// record and false). Fenced: only the session's owner reserves.
func (s *Store) ReserveIdempotencyKey(ctx context.Context, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	return sessionKeys.reserve(ctx, s, r.SessionID, r)
}

// FinishIdempotencyKey stores the answer of a held key (fenced).
func (s *Store) FinishIdempotencyKey(ctx context.Context, sessionID, key, attempt string, answer json.RawMessage) error {
	return sessionKeys.finish(ctx, s, sessionID, key, attempt, answer)
}

// ReleaseIdempotencyKey deletes a key attempt holds whose turn never started.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, sessionID, key, attempt string) error {
	return sessionKeys.release(ctx, s, sessionID, key, attempt)
}

// GetIdempotencyKey returns the record of a key.
func (s *Store) GetIdempotencyKey(ctx context.Context, sessionID, key string) (carryover.IdempotencyRecord, error) {
	var row idempotencyRow
	err := s.get(ctx, &row, `SELECT `+sessionKeys.columns+` FROM idempotency_keys WHERE session_id = $1 AND key = $2`, sessionID, key)
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
	return sessionKeys.expire(ctx, s, now)
}

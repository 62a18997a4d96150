package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

// keyTable is one table of idempotency keys: a session's turns (idempotency_keys, scoped by
// session_id, fenced by the session's owner) or a tenant's POST /api/execute runs
// (ephemeral_idempotency_keys, scoped by tenant, not fenced: no session owns them). Both hold the
// same record, so one set of statements serves both.
type keyTable struct {
	table string // the table's name
	scope string // the column that scopes a key: session_id or tenant
	noun  string // what the scope is, for errors: "session" or "tenant"
	// columns reads a row as an idempotencyRow (a tenant's keys have no session_id).
	columns string
	fenced  bool // reserve and finish only on the node that owns the session
}

var (
	sessionKeys = keyTable{"idempotency_keys", "session_id", "session",
		`session_id, key, fingerprint, attempt, state, answer, created_at, expires_at`, true}
	tenantKeys = keyTable{"ephemeral_idempotency_keys", "tenant", "tenant",
		`'' AS session_id, key, fingerprint, attempt, state, answer, created_at, expires_at`, false}
)

// fence locks the session's row and checks this node owns it, for a fenced table.
func (t keyTable) fence(ctx context.Context, s *Store, tx *sqlx.Tx, scope string) error {
	if !t.fenced {
		return nil
	}
	return s.lockFenced(ctx, tx, scope)
}

// reserve records r as pending under scope unless the scope holds the key unexpired (then that
// record and false). The insert's ON CONFLICT makes concurrent reservations (on any node) queue on
// the row: the first inserts, the others find it.
func (t keyTable) reserve(ctx context.Context, s *Store, scope string, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	var held carryover.IdempotencyRecord
	won := false
	err := s.tx(ctx, func(tx *sqlx.Tx) error {
		won = false // tx may run this again
		if err := t.fence(ctx, s, tx, scope); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO `+t.table+` AS k
			(`+t.scope+`, key, fingerprint, attempt, state, answer, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, NULL, $6, $7)
			ON CONFLICT (`+t.scope+`, key) DO UPDATE SET fingerprint = excluded.fingerprint, attempt = excluded.attempt,
				state = excluded.state, answer = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at
			WHERE k.expires_at <= excluded.created_at`,
			scope, r.Key, r.Fingerprint, r.Attempt, carryover.IdempotencyPending, nsOf(r.CreatedAt), nsOf(r.ExpiresAt))
		if err != nil {
			return fmt.Errorf("reserve idempotency key of %s %q: %w", t.noun, scope, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			won = true
			return nil
		}
		var row idempotencyRow
		if err := tx.GetContext(ctx, &row, `SELECT `+t.columns+` FROM `+t.table+` WHERE `+t.scope+` = $1 AND key = $2`, scope, r.Key); err != nil {
			return fmt.Errorf("read idempotency key of %s %q: %w", t.noun, scope, err)
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

// finish stores the answer of a key attempt holds. Fenced for a session: a node that lost the
// session leaves the key pending (a retry then answers run_interrupted).
func (t keyTable) finish(ctx context.Context, s *Store, scope, key, attempt string, answer json.RawMessage) error {
	return s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := t.fence(ctx, s, tx, scope); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE `+t.table+` SET state = $1, answer = $2 WHERE `+t.scope+` = $3 AND key = $4 AND attempt = $5`,
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

// release deletes a key attempt holds whose turn or run never started. Matching the attempt, not
// fencing, is what makes it safe: a node that lost the session never reserved the key anew under
// the new owner's attempt.
func (t keyTable) release(ctx context.Context, s *Store, scope, key, attempt string) error {
	if _, err := s.execSame(ctx, `DELETE FROM `+t.table+` WHERE `+t.scope+` = $1 AND key = $2 AND attempt = $3`,
		scope, key, attempt); err != nil {
		return fmt.Errorf("release idempotency key of %s %q: %w", t.noun, scope, err)
	}
	return nil
}

// expire deletes the records expired at now.
func (t keyTable) expire(ctx context.Context, s *Store, now time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE expires_at <= $1`, nsOf(now))
	if err != nil {
		return 0, fmt.Errorf("expire keys of %s: %w", t.table, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

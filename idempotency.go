package carryover

import (
	"context"
	"encoding/json"
	"time"
)

// Idempotency keys make a turn exactly-once under retries: a client sends the same key with every
// attempt of one run, and the server runs the cell for the first attempt only. The key is reserved
// in the store before the cell starts (so a retry reaching any node of a cluster finds it) and the
// answer is stored when the turn has been recorded; a retry gets that answer instead of a second run.

// Idempotency record states.
const (
	IdempotencyPending = "pending" // reserved: the turn is running, or its attempt died before the answer was stored
	IdempotencyDone    = "done"    // the answer is stored
)

// IdempotencyRecord is one key of a session's turns.
type IdempotencyRecord struct {
	SessionID string `db:"session_id"`
	Key       string `db:"key"`
	// Fingerprint is a hash of the request the key was first used with (its kind and body): the same
	// key with another request is refused, not answered with the first one's answer.
	Fingerprint string `db:"fingerprint"`
	// Attempt names the server process that reserved the key (an id drawn at each start): a retry
	// served by another process finds a pending key whose attempt can no longer finish.
	Attempt   string          `db:"attempt"`
	State     string          `db:"state"`  // IdempotencyPending | IdempotencyDone
	Answer    json.RawMessage `db:"answer"` // the stored answer (done only): opaque to the store
	CreatedAt time.Time       `db:"created_at"`
	ExpiresAt time.Time       `db:"expires_at"`
}

// Expired reports whether the record no longer binds its key at now.
func (r IdempotencyRecord) Expired(now time.Time) bool { return !r.ExpiresAt.After(now) }

// IdempotencyStore keeps idempotency keys. They belong to their session: deleting the session
// deletes them.
type IdempotencyStore interface {
	// ReserveIdempotencyKey records r (state pending; zero CreatedAt means now) unless the session
	// already holds r.Key unexpired: then it returns that record and false, changing nothing. An
	// expired record of the key is replaced. Under concurrent reservations of one key exactly one
	// wins. CodeNotFound if the session does not exist.
	ReserveIdempotencyKey(ctx context.Context, r IdempotencyRecord) (IdempotencyRecord, bool, error)
	// FinishIdempotencyKey stores the answer of a pending key reserved by attempt (state done);
	// CodeNotFound if the session does not hold the key under that attempt. Matching the attempt
	// keeps a stalled first attempt, whose record expired and was reserved anew by another, from
	// answering for the new one.
	FinishIdempotencyKey(ctx context.Context, sessionID, key, attempt string, answer json.RawMessage) error
	// ReleaseIdempotencyKey deletes a key reserved by attempt whose turn never started (it was
	// refused before its cell ran), so a retry runs it. Releasing a key that is not held, or is held
	// by another attempt, changes nothing and is not an error: a stalled attempt's release never
	// frees a key another attempt is running under.
	ReleaseIdempotencyKey(ctx context.Context, sessionID, key, attempt string) error
	// GetIdempotencyKey returns the record of a key (expired or not); CodeNotFound if there is none.
	GetIdempotencyKey(ctx context.Context, sessionID, key string) (IdempotencyRecord, error)
	// ExpireIdempotencyKeys deletes every record expired at now and returns how many went.
	ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int, error)
}

// The codes of idempotency keys (docs/api.md, "Idempotency keys").
const (
	// CodeIdempotencyKeyReused: the key was first used with another request (HTTP 422).
	CodeIdempotencyKeyReused Code = "idempotency_key_reused"
	// CodeRunInterrupted: the key's first attempt was cut off (its server stopped, or lost the
	// session) before its answer was stored; the cell may have run, so it is not run again (HTTP 409).
	CodeRunInterrupted Code = "run_interrupted"
)

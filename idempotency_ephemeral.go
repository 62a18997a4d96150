package carryover

import (
	"context"
	"encoding/json"
	"time"
)

// EphemeralKeyStore keeps the idempotency keys of POST /api/execute. Its runs have no session to
// hold a key (each runs in a throwaway session destroyed at once), so a key belongs to its tenant:
// two tenants may use the same key, and a retry of one tenant's run never gets another's answer.
// The rules are IdempotencyStore's; records come back with SessionID empty.
type EphemeralKeyStore interface {
	// ReserveEphemeralKey records r (state pending; zero CreatedAt means now) under tenant unless the
	// tenant already holds r.Key unexpired: then it returns that record and false, changing nothing.
	// An expired record of the key is replaced. Under concurrent reservations exactly one wins.
	ReserveEphemeralKey(ctx context.Context, tenant string, r IdempotencyRecord) (IdempotencyRecord, bool, error)
	// FinishEphemeralKey stores the answer of a pending key reserved by attempt (state done);
	// CodeNotFound if the tenant does not hold the key under that attempt.
	FinishEphemeralKey(ctx context.Context, tenant, key, attempt string, answer json.RawMessage) error
	// ReleaseEphemeralKey deletes a key reserved by attempt whose run never started; a key not held,
	// or held by another attempt, is left alone (not an error).
	ReleaseEphemeralKey(ctx context.Context, tenant, key, attempt string) error
	// ExpireEphemeralKeys deletes every record expired at now and returns how many went.
	ExpireEphemeralKeys(ctx context.Context, now time.Time) (int, error)
}

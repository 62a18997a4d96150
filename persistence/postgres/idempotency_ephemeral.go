package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/carryover/carryover"
)

// ReserveEphemeralKey records r as pending under tenant unless the tenant holds the key unexpired
// (then that record and false).
func (s *Store) ReserveEphemeralKey(ctx context.Context, tenant string, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	r.SessionID = ""
	return tenantKeys.reserve(ctx, s, tenant, r)
}

// FinishEphemeralKey stores the answer of a key attempt holds.
func (s *Store) FinishEphemeralKey(ctx context.Context, tenant, key, attempt string, answer json.RawMessage) error {
	return tenantKeys.finish(ctx, s, tenant, key, attempt, answer)
}

// ReleaseEphemeralKey deletes a key attempt holds whose run never started.
func (s *Store) ReleaseEphemeralKey(ctx context.Context, tenant, key, attempt string) error {
	return tenantKeys.release(ctx, s, tenant, key, attempt)
}

// ExpireEphemeralKeys deletes the records expired at now.
func (s *Store) ExpireEphemeralKeys(ctx context.Context, now time.Time) (int, error) {
	return tenantKeys.expire(ctx, s, now)
}

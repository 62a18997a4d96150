package idempotency

import (
	"context"
	"encoding/json"
	"time"

	"github.com/carryover/carryover"
)

// TenantStore makes a tenant's key table (POST /api/execute: a throwaway session cannot hold a key)
// a Store whose scope is the tenant's name, so a keyed throwaway run follows Do's rules exactly.
func TenantStore(st carryover.EphemeralKeyStore) Store { return tenantStore{st} }

type tenantStore struct{ st carryover.EphemeralKeyStore }

func (t tenantStore) ReserveIdempotencyKey(ctx context.Context, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	tenant := r.SessionID
	r.SessionID = ""
	rec, won, err := t.st.ReserveEphemeralKey(ctx, tenant, r)
	rec.SessionID = tenant
	return rec, won, err
}

func (t tenantStore) FinishIdempotencyKey(ctx context.Context, tenant, key, attempt string, answer json.RawMessage) error {
	return t.st.FinishEphemeralKey(ctx, tenant, key, attempt, answer)
}

func (t tenantStore) ReleaseIdempotencyKey(ctx context.Context, tenant, key, attempt string) error {
	return t.st.ReleaseEphemeralKey(ctx, tenant, key, attempt)
}

func (t tenantStore) ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int, error) {
	return t.st.ExpireEphemeralKeys(ctx, now)
}

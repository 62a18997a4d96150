package mock

import (
	"context"
	"encoding/json"
	"time"

	"github.com/carryover/carryover"
)

// The fake's carryover.EphemeralKeyStore: the keys of /api/execute, in the same map as the
// sessions' keys under a scope no session id can take ("\x00" + tenant).

func ephemeralScope(tenant string) string { return "\x00" + tenant }

// ReserveEphemeralKey records r as pending unless the tenant holds the key unexpired.
func (s *Store) ReserveEphemeralKey(_ context.Context, tenant string, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	r.SessionID = ""
	k := &s.idem
	k.mu.Lock()
	defer k.mu.Unlock()
	scope := ephemeralScope(tenant)
	if held, ok := k.keys[scope][r.Key]; ok && !held.Expired(r.CreatedAt) {
		return held, false, nil
	}
	if k.keys == nil {
		k.keys = map[string]map[string]carryover.IdempotencyRecord{}
	}
	if k.keys[scope] == nil {
		k.keys[scope] = map[string]carryover.IdempotencyRecord{}
	}
	r.State, r.Answer = carryover.IdempotencyPending, nil
	k.keys[scope][r.Key] = r
	return r, true, nil
}

// FinishEphemeralKey stores the answer of a key attempt holds.
func (s *Store) FinishEphemeralKey(ctx context.Context, tenant, key, attempt string, answer json.RawMessage) error {
	return s.FinishIdempotencyKey(ctx, ephemeralScope(tenant), key, attempt, answer)
}

// ReleaseEphemeralKey deletes a key attempt holds.
func (s *Store) ReleaseEphemeralKey(ctx context.Context, tenant, key, attempt string) error {
	return s.ReleaseIdempotencyKey(ctx, ephemeralScope(tenant), key, attempt)
}

// ExpireEphemeralKeys deletes the records expired at now (ExpireIdempotencyKeys takes them too).
func (s *Store) ExpireEphemeralKeys(_ context.Context, now time.Time) (int, error) {
	k := &s.idem
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for scope, m := range k.keys {
		if len(scope) == 0 || scope[0] != 0 {
			continue
		}
		for key, r := range m {
			if r.Expired(now) {
				delete(m, key)
				n++
			}
		}
	}
	return n, nil
}

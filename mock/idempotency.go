package mock

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/carryover/carryover"
)

// idempotencyKeys is the fake's carryover.IdempotencyStore: session -> key -> record. Its own lock
// (taken after Store.mu when both are held) keeps it apart from the rest of the fake.
type idempotencyKeys struct {
	mu   sync.Mutex
	keys map[string]map[string]carryover.IdempotencyRecord
}

// drop forgets a deleted session's keys.
func (k *idempotencyKeys) drop(sessionID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.keys, sessionID)
}

// ReserveIdempotencyKey records r as pending unless the session holds the key unexpired.
func (s *Store) ReserveIdempotencyKey(_ context.Context, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	s.mu.Lock()
	_, ok := s.sessions[r.SessionID]
	s.mu.Unlock()
	if !ok {
		return carryover.IdempotencyRecord{}, false, notFound("session", r.SessionID)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now().UTC()
	}
	k := &s.idem
	k.mu.Lock()
	defer k.mu.Unlock()
	if held, ok := k.keys[r.SessionID][r.Key]; ok && !held.Expired(r.CreatedAt) {
		return held, false, nil
	}
	if k.keys == nil {
		k.keys = map[string]map[string]carryover.IdempotencyRecord{}
	}
	if k.keys[r.SessionID] == nil {
		k.keys[r.SessionID] = map[string]carryover.IdempotencyRecord{}
	}
	r.State, r.Answer = carryover.IdempotencyPending, nil
	k.keys[r.SessionID][r.Key] = r
	return r, true, nil
}

// FinishIdempotencyKey stores the answer of a key attempt holds.
func (s *Store) FinishIdempotencyKey(_ context.Context, sessionID, key, attempt string, answer json.RawMessage) error {
	k := &s.idem
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.keys[sessionID][key]
	if !ok || r.Attempt != attempt {
		return notFound("idempotency key", key)
	}
	r.State, r.Answer = carryover.IdempotencyDone, append(json.RawMessage(nil), answer...)
	k.keys[sessionID][key] = r
	return nil
}

// ReleaseIdempotencyKey deletes a key attempt holds.
func (s *Store) ReleaseIdempotencyKey(_ context.Context, sessionID, key, attempt string) error {
	k := &s.idem
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.keys[sessionID][key]; ok && r.Attempt == attempt {
		delete(k.keys[sessionID], key)
	}
	return nil
}

// GetIdempotencyKey returns the record of a key.
func (s *Store) GetIdempotencyKey(_ context.Context, sessionID, key string) (carryover.IdempotencyRecord, error) {
	k := &s.idem
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.keys[sessionID][key]
	if !ok {
		return carryover.IdempotencyRecord{}, notFound("idempotency key", key)
	}
	return r, nil
}

// ExpireIdempotencyKeys deletes the records expired at now.
func (s *Store) ExpireIdempotencyKeys(_ context.Context, now time.Time) (int, error) {
	k := &s.idem
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, m := range k.keys {
		for key, r := range m {
			if r.Expired(now) {
				delete(m, key)
				n++
			}
		}
	}
	return n, nil
}

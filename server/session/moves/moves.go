// Package moves remembers the sessions a node lately stopped serving because another node serves
// them now (a draining node's handover, an eviction), so a request routed to it just before the
// move is told not_owner (421) instead of not_found (server/session's lookups).
package moves

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/carryover/carryover"
)

// For is how long this node remembers that a session moved to another node (Evict, Handover).
// A request routed here just before the move finds the session gone when it looks it up: told
// not_owner (421), its client retries at once and reaches the new owner; told not_found (404), it
// would believe the session deleted. A minute covers any request already past the router.
const For = time.Minute

// Set is the sessions this node stopped serving because another node serves them now.
type Set struct {
	mu  sync.Mutex
	ids map[string]time.Time // when each moved
}

// Add records that session id moved away, forgetting moves older than For.
func (m *Set) Add(id string) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ids == nil {
		m.ids = map[string]time.Time{}
	}
	for k, at := range m.ids {
		if now.Sub(at) > For {
			delete(m.ids, k)
		}
	}
	m.ids[id] = now
}

// Forget says session id is served here again (adopted).
func (m *Set) Forget(id string) {
	m.mu.Lock()
	delete(m.ids, id)
	m.mu.Unlock()
}

// NotHere is the error of a lookup of session id, which this node does not have: not_owner when it
// moved to another node lately and still exists (the store says so: one deleted since is
// not_found, else its client would be sent round for a minute), not_found otherwise.
func (m *Set) NotHere(store carryover.Store, id string) error {
	m.mu.Lock()
	at, moved := m.ids[id]
	m.mu.Unlock()
	notFound := carryover.Errorf(carryover.CodeNotFound, "session %q not found", id).WithDetails("session_id", id)
	if !moved || time.Since(at) > For {
		return notFound
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := store.GetSession(ctx, id); errors.Is(err, carryover.ErrNotFound) {
		return notFound
	}
	return carryover.Errorf(carryover.CodeNotOwner, "session %q moved to another node; retry", id).
		WithDetails("session_id", id)
}

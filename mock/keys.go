package mock

import (
	"context"
	"sort"
	"time"

	"github.com/carryover/carryover"
)

// CreateKey stores k; conflict when its id or hash is taken.
func (s *Store) CreateKey(_ context.Context, k carryover.APIKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.keys {
		if o.ID == k.ID || o.Hash == k.Hash {
			return carryover.Errorf(carryover.CodeConflict, "key %q exists", k.ID)
		}
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now().UTC()
	}
	s.keys[k.ID] = k
	return nil
}

// KeyByHash returns the key of hash.
func (s *Store) KeyByHash(_ context.Context, hash string) (carryover.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.Hash == hash {
			return k, nil
		}
	}
	return carryover.APIKey{}, carryover.Errorf(carryover.CodeNotFound, "no such key")
}

// ListKeys returns the keys of tenant ("" for all), oldest first.
func (s *Store) ListKeys(_ context.Context, tenant string) ([]carryover.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []carryover.APIKey{}
	for _, k := range s.keys {
		if tenant == "" || k.Tenant == tenant {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// DeleteKey removes a key.
func (s *Store) DeleteKey(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[id]; !ok {
		return notFound("key", id)
	}
	delete(s.keys, id)
	return nil
}

// TouchKey sets a key's last use.
func (s *Store) TouchKey(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.keys[id]; ok {
		at = at.UTC()
		k.LastUsedAt = &at
		s.keys[id] = k
	}
	return nil
}

package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/carryover/carryover"
)

// credential is who a request is: its tenant, what it may do, and the id its rate limit counts
// under (an API key's id, or "token:<tenant>" for a token of the config file).
type credential struct {
	tenant string
	scope  carryover.Scope
	id     string
}

type credentialKey struct{}

func withCredential(ctx context.Context, c credential) context.Context {
	return context.WithValue(carryover.NewContextWithTenant(ctx, c.tenant), credentialKey{}, c)
}

func credentialFrom(ctx context.Context) (credential, bool) {
	c, ok := ctx.Value(credentialKey{}).(credential)
	return c, ok
}

// keyCacheTTL bounds how long a node trusts what it read of a key: a key revoked on any node of a
// cluster is refused on every node at most this long after. The store lookup it saves is one
// indexed read (SQLite: tens of microseconds; PostgreSQL: a network round trip), taken at most
// twice a second per key and node.
const keyCacheTTL = 500 * time.Millisecond

// touchEvery is how often a key's last use is written: at most once a minute per key and node, so
// a busy key costs no write per request (a listing's last_used_at is up to a minute behind).
const touchEvery = time.Minute

// keyVerifier checks API key secrets against the store, caching each verified key briefly.
type keyVerifier struct {
	store carryover.KeyStore
	log   *slog.Logger
	now   func() time.Time

	mu      sync.Mutex
	cache   map[string]cachedKey // by hash
	touched map[string]time.Time // by key id
}

type cachedKey struct {
	key carryover.APIKey
	at  time.Time
}

func newKeyVerifier(store carryover.KeyStore, log *slog.Logger) *keyVerifier {
	if store == nil {
		return nil
	}
	return &keyVerifier{store: store, log: log, now: time.Now, cache: map[string]cachedKey{}, touched: map[string]time.Time{}}
}

// verify returns the key of secret; ok is false for an unknown, revoked or expired key.
func (v *keyVerifier) verify(ctx context.Context, secret string) (carryover.APIKey, bool, error) {
	if v == nil || !carryover.IsKeySecret(secret) {
		return carryover.APIKey{}, false, nil
	}
	hash := carryover.KeyHash(secret)
	now := v.now()
	v.mu.Lock()
	c, hit := v.cache[hash]
	v.mu.Unlock()
	if !hit || now.Sub(c.at) >= keyCacheTTL {
		k, err := v.store.KeyByHash(ctx, hash)
		if errors.Is(err, carryover.ErrNotFound) {
			v.mu.Lock()
			delete(v.cache, hash)
			v.mu.Unlock()
			return carryover.APIKey{}, false, nil
		}
		if err != nil {
			return carryover.APIKey{}, false, err
		}
		c = cachedKey{key: k, at: now}
		v.mu.Lock()
		v.sweepLocked(now)
		v.cache[hash] = c
		v.mu.Unlock()
	}
	// The hash found the row; comparing it again in constant time costs nothing and keeps a map
	// lookup's timing out of the answer.
	if subtle.ConstantTimeCompare([]byte(c.key.Hash), []byte(hash)) != 1 || c.key.Expired(now) {
		return carryover.APIKey{}, false, nil
	}
	v.touch(c.key.ID, now)
	return c.key, true, nil
}

// forget drops key id from this node's cache (a revocation here is effective here at once).
func (v *keyVerifier) forget(id string) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for h, c := range v.cache {
		if c.key.ID == id {
			delete(v.cache, h)
		}
	}
}

// touch records the key's use in the store, in the background, at most once per touchEvery.
func (v *keyVerifier) touch(id string, now time.Time) {
	v.mu.Lock()
	last, ok := v.touched[id]
	due := !ok || now.Sub(last) >= touchEvery
	if due {
		v.touched[id] = now
	}
	v.mu.Unlock()
	if !due {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := v.store.TouchKey(ctx, id, time.Now().UTC()); err != nil {
			v.log.Warn("key last use not recorded", "key_id", id, "err", err)
		}
	}()
}

// sweepLocked drops stale cache entries and old touch marks when the cache has grown, so the maps
// hold only keys used lately.
func (v *keyVerifier) sweepLocked(now time.Time) {
	if len(v.cache) < 1024 {
		return
	}
	for h, c := range v.cache {
		if now.Sub(c.at) >= keyCacheTTL {
			delete(v.cache, h)
		}
	}
	for id, at := range v.touched {
		if now.Sub(at) >= touchEvery {
			delete(v.touched, id)
		}
	}
}

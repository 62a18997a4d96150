package httpapi

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
)

// TestKeyVerifierCache: a key deleted from the store (revoked on another node) is still trusted
// by this node for less than keyCacheTTL and refused from then on; forget refuses it at once; an
// expired key and a config-token-shaped string are refused.
func TestKeyVerifierCache(t *testing.T) {
	ctx := context.Background()
	store := mock.NewStore()
	now := time.Unix(1000, 0)
	v := newKeyVerifier(store, slog.Default())
	v.now = func() time.Time { return now }
	k, secret, err := carryover.NewKey("acme", carryover.ScopeRun, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := v.verify(ctx, secret); !ok || err != nil || got.ID != k.ID {
		t.Fatalf("verify = %+v, %v, %v", got, ok, err)
	}
	if err := store.DeleteKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	now = now.Add(keyCacheTTL - time.Millisecond)
	if _, ok, _ := v.verify(ctx, secret); !ok {
		t.Fatal("refused inside the cache time: the test no longer shows the cache")
	}
	now = now.Add(time.Millisecond)
	if _, ok, _ := v.verify(ctx, secret); ok {
		t.Fatalf("a revoked key still passes %v after it was verified", keyCacheTTL)
	}

	k2, secret2, _ := carryover.NewKey("acme", carryover.ScopeRun, "", nil)
	_ = store.CreateKey(ctx, k2)
	if _, ok, _ := v.verify(ctx, secret2); !ok {
		t.Fatal("second key refused")
	}
	_ = store.DeleteKey(ctx, k2.ID)
	v.forget(k2.ID)
	if _, ok, _ := v.verify(ctx, secret2); ok {
		t.Fatal("a key revoked through this node passes from its cache")
	}

	exp := now.Add(time.Second)
	k3, secret3, _ := carryover.NewKey("acme", carryover.ScopeRun, "", &exp)
	_ = store.CreateKey(ctx, k3)
	if _, ok, _ := v.verify(ctx, secret3); !ok {
		t.Fatal("a key before its expiry refused")
	}
	now = exp
	if _, ok, _ := v.verify(ctx, secret3); ok {
		t.Fatal("an expired key passes")
	}
	if _, ok, _ := v.verify(ctx, "cok_short"); ok {
		t.Fatal("a malformed secret passes")
	}
}

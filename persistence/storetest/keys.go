package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// testKeys: keys are found by hash only, listed per tenant oldest first, touched, revoked; a taken
// id or hash is a conflict, an unknown hash or id not found.
func testKeys(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UTC().Round(time.Millisecond)
	a, secretA, err := carryover.NewKey("acme", carryover.ScopeRun, "ci", &exp)
	if err != nil {
		t.Fatal(err)
	}
	a.CreatedAt = time.Now().Add(-time.Minute).UTC().Round(time.Millisecond)
	b, _, _ := carryover.NewKey("acme", carryover.ScopeRead, "", nil)
	c, _, _ := carryover.NewKey("other", carryover.ScopeAdmin, "", nil)
	for _, k := range []carryover.APIKey{a, b, c} {
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatalf("create key %s: %v", k.ID, err)
		}
	}
	dupID := b
	dupID.Hash = carryover.KeyHash("another secret")
	wantCode(t, "create key with a taken id", s.CreateKey(ctx, dupID), carryover.CodeConflict)
	dupHash, _, _ := carryover.NewKey("acme", carryover.ScopeRead, "", nil)
	dupHash.Hash = a.Hash
	wantCode(t, "create key with a taken hash", s.CreateKey(ctx, dupHash), carryover.CodeConflict)

	got, err := s.KeyByHash(ctx, carryover.KeyHash(secretA))
	if err != nil {
		t.Fatalf("key by hash: %v", err)
	}
	if got.ID != a.ID || got.Tenant != "acme" || got.Scope != carryover.ScopeRun || got.Name != "ci" || got.Prefix != a.Prefix ||
		got.Hash != a.Hash || !got.CreatedAt.Equal(a.CreatedAt) || got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.LastUsedAt != nil {
		t.Fatalf("key by hash = %+v, want %+v", got, a)
	}
	_, err = s.KeyByHash(ctx, carryover.KeyHash("nope"))
	wantCode(t, "key by unknown hash", err, carryover.CodeNotFound)

	list, err := s.ListKeys(ctx, "acme")
	if err != nil || len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID {
		t.Fatalf("list acme = %+v, %v; want %s then %s", list, err, a.ID, b.ID)
	}
	if list[1].ExpiresAt != nil {
		t.Fatalf("a key without expiry lists one: %+v", list[1])
	}
	all, err := s.ListKeys(ctx, "")
	if err != nil || len(all) != 3 || all[0].ID != a.ID {
		t.Fatalf("list all = %+v, %v; want 3 keys, %s first", all, err, a.ID)
	}
	if none, err := s.ListKeys(ctx, "nobody"); err != nil || len(none) != 0 {
		t.Fatalf("list of a tenant without keys = %+v, %v", none, err)
	}

	used := time.Now().UTC().Round(time.Millisecond)
	if err := s.TouchKey(ctx, b.ID, used); err != nil {
		t.Fatalf("touch: %v", err)
	}
	if got, _ := s.KeyByHash(ctx, b.Hash); got.LastUsedAt == nil || !got.LastUsedAt.Equal(used) {
		t.Fatalf("last used after touch = %v, want %v", got.LastUsedAt, used)
	}

	if err := s.DeleteKey(ctx, a.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = s.KeyByHash(ctx, a.Hash)
	wantCode(t, "key by hash after delete", err, carryover.CodeNotFound)
	wantCode(t, "delete again", s.DeleteKey(ctx, a.ID), carryover.CodeNotFound)
	if err := s.TouchKey(ctx, a.ID, used); err != nil {
		t.Fatalf("touch of a deleted key: %v, want no error", err)
	}
	if list, _ := s.ListKeys(ctx, "acme"); len(list) != 1 || list[0].ID != b.ID {
		t.Fatalf("list after delete = %+v", list)
	}
}

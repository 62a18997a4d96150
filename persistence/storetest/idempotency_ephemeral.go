package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// testEphemeralKeys: the keys of /api/execute belong to a tenant: reserved once (the second
// reservation gets the first record), per tenant, finished only by their attempt, released,
// expired and replaced.
func testEphemeralKeys(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	r := carryover.IdempotencyRecord{Key: "k1", Fingerprint: "f1", Attempt: "p1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	got, won, err := s.ReserveEphemeralKey(ctx, "t1", r)
	if err != nil || !won || got.State != carryover.IdempotencyPending || got.Fingerprint != "f1" || got.SessionID != "" {
		t.Fatalf("first reservation: %+v won=%v err=%v", got, won, err)
	}
	again := r
	again.Fingerprint, again.Attempt, again.CreatedAt = "f2", "p2", now.Add(time.Minute)
	got, won, err = s.ReserveEphemeralKey(ctx, "t1", again)
	if err != nil || won || got.Fingerprint != "f1" || got.Attempt != "p1" || got.State != carryover.IdempotencyPending ||
		!got.CreatedAt.Equal(now) || !got.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("second reservation: %+v won=%v err=%v, want the first record", got, won, err)
	}
	if _, won, err := s.ReserveEphemeralKey(ctx, "t2", again); err != nil || !won {
		t.Fatalf("the same key of another tenant: won=%v err=%v", won, err)
	}
	answer := json.RawMessage(`{"result":{"stdout":"hi\n"}}`)
	wantCode(t, "finish by another attempt", s.FinishEphemeralKey(ctx, "t1", "k1", "p2", answer), carryover.CodeNotFound)
	if err := s.FinishEphemeralKey(ctx, "t1", "k1", "p1", answer); err != nil {
		t.Fatal(err)
	}
	got, won, err = s.ReserveEphemeralKey(ctx, "t1", again)
	if err != nil || won || got.State != carryover.IdempotencyDone || string(got.Answer) != string(answer) {
		t.Fatalf("reservation of a finished key: %+v won=%v err=%v", got, won, err)
	}
	wantCode(t, "finish of an unknown key", s.FinishEphemeralKey(ctx, "t1", "nope", "p1", answer), carryover.CodeNotFound)
	// A release by another attempt changes nothing; by its own, the key is free again.
	if err := s.ReleaseEphemeralKey(ctx, "t2", "k1", "p1"); err != nil {
		t.Fatal(err)
	}
	if _, won, _ := s.ReserveEphemeralKey(ctx, "t2", r); won {
		t.Fatal("a release by another attempt freed the key")
	}
	if err := s.ReleaseEphemeralKey(ctx, "t2", "k1", "p2"); err != nil {
		t.Fatal(err)
	}
	if _, won, err := s.ReserveEphemeralKey(ctx, "t2", r); err != nil || !won {
		t.Fatalf("reservation after the release: won=%v err=%v", won, err)
	}
	// Expiry: the records expired at now go; an expired key is reserved anew.
	n, err := s.ExpireEphemeralKeys(ctx, now.Add(2*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("expire: %d %v, want 2", n, err)
	}
	late := carryover.IdempotencyRecord{Key: "k1", Fingerprint: "f3", Attempt: "p3", CreatedAt: now.Add(3 * time.Hour), ExpiresAt: now.Add(4 * time.Hour)}
	if got, won, err := s.ReserveEphemeralKey(ctx, "t1", late); err != nil || !won || got.Fingerprint != "f3" {
		t.Fatalf("reservation after expiry: %+v won=%v err=%v", got, won, err)
	}
	old := carryover.IdempotencyRecord{Key: "k1", Fingerprint: "f4", Attempt: "p4", CreatedAt: now.Add(5 * time.Hour), ExpiresAt: now.Add(6 * time.Hour)}
	if got, won, err := s.ReserveEphemeralKey(ctx, "t1", old); err != nil || !won || got.Fingerprint != "f4" {
		t.Fatalf("reservation over an expired record: %+v won=%v err=%v", got, won, err)
	}
}

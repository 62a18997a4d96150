package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// testIdempotencyKeys: a key is reserved once (the second reservation gets the first record and
// changes nothing), finished with its answer, released, expired and replaced; a missing session is
// not found and a deleted session takes its keys along.
func testIdempotencyKeys(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	session(t, s, "b")
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	idempotencyReserveFinish(t, s, now)
	idempotencyRelease(t, s, now)
	idempotencyExpire(t, s, now)
	// A deleted session takes its keys along.
	if err := s.DeleteSession(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	session(t, s, "a")
	if _, err := s.GetIdempotencyKey(ctx, "a", "k1"); err == nil {
		t.Fatal("a deleted session's key survived it")
	}
}

// idempotencyReserveFinish: a key is reserved once, per session; only the attempt that reserved it
// finishes it; a finished key answers a reservation with its answer; unknown keys and sessions are
// not found.
func idempotencyReserveFinish(t *testing.T, s carryover.Store, now time.Time) {
	ctx := context.Background()
	r := carryover.IdempotencyRecord{SessionID: "a", Key: "k1", Fingerprint: "f1", Attempt: "p1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	got, won, err := s.ReserveIdempotencyKey(ctx, r)
	if err != nil || !won || got.State != carryover.IdempotencyPending || got.Fingerprint != "f1" {
		t.Fatalf("first reservation: %+v won=%v err=%v", got, won, err)
	}
	again := r
	again.Fingerprint, again.Attempt, again.CreatedAt = "f2", "p2", now.Add(time.Minute)
	got, won, err = s.ReserveIdempotencyKey(ctx, again)
	if err != nil || won || got.Fingerprint != "f1" || got.Attempt != "p1" || got.State != carryover.IdempotencyPending ||
		!got.CreatedAt.Equal(now) || !got.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("second reservation: %+v won=%v err=%v, want the first record", got, won, err)
	}
	// Keys are per session.
	if _, won, err := s.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "b", Key: "k1", Fingerprint: "f9", Attempt: "p1",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil || !won {
		t.Fatalf("the same key on another session: won=%v err=%v", won, err)
	}
	answer := json.RawMessage(`{"result":{"stdout":"hi\n"}}`)
	// Only the attempt that reserved a key settles it.
	wantCode(t, "finish by another attempt", s.FinishIdempotencyKey(ctx, "a", "k1", "p2", answer), carryover.CodeNotFound)
	if got, _ := s.GetIdempotencyKey(ctx, "a", "k1"); got.State != carryover.IdempotencyPending || got.Answer != nil {
		t.Fatalf("after a finish by another attempt: %+v", got)
	}
	if err := s.FinishIdempotencyKey(ctx, "a", "k1", "p1", answer); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetIdempotencyKey(ctx, "a", "k1")
	if err != nil || got.State != carryover.IdempotencyDone || string(got.Answer) != string(answer) || got.Attempt != "p1" {
		t.Fatalf("finished: %+v err=%v", got, err)
	}
	got, won, err = s.ReserveIdempotencyKey(ctx, again)
	if err != nil || won || got.State != carryover.IdempotencyDone || string(got.Answer) != string(answer) {
		t.Fatalf("reservation of a finished key: %+v won=%v err=%v", got, won, err)
	}
	wantCode(t, "finish of an unknown key", s.FinishIdempotencyKey(ctx, "a", "nope", "p1", answer), carryover.CodeNotFound)
	_, err = s.GetIdempotencyKey(ctx, "a", "nope")
	wantCode(t, "get of an unknown key", err, carryover.CodeNotFound)
	_, _, err = s.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "nope", Key: "k", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	wantCode(t, "reservation for a missing session", err, carryover.CodeNotFound)
}

// idempotencyRelease: a release by another attempt changes nothing; by its own, the next
// reservation wins.
func idempotencyRelease(t *testing.T, s carryover.Store, now time.Time) {
	ctx := context.Background()
	if err := s.ReleaseIdempotencyKey(ctx, "b", "k1", "p2"); err != nil {
		t.Fatalf("release by another attempt: %v", err)
	}
	if got, err := s.GetIdempotencyKey(ctx, "b", "k1"); err != nil || got.Attempt != "p1" || got.State != carryover.IdempotencyPending {
		t.Fatalf("after a release by another attempt: %+v err=%v", got, err)
	}
	if err := s.ReleaseIdempotencyKey(ctx, "b", "k1", "p1"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseIdempotencyKey(ctx, "b", "never", "p1"); err != nil {
		t.Fatalf("release of a key not held: %v", err)
	}
	if _, won, err := s.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "b", Key: "k1", Fingerprint: "f3", Attempt: "p2",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil || !won {
		t.Fatalf("reservation after release: won=%v err=%v", won, err)
	}
}

// idempotencyExpire: an expired key is replaced by a reservation, and the GC deletes it.
func idempotencyExpire(t *testing.T, s carryover.Store, now time.Time) {
	ctx := context.Background()
	late := now.Add(2 * time.Hour)
	got, won, err := s.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "a", Key: "k1", Fingerprint: "f4", Attempt: "p3",
		CreatedAt: late, ExpiresAt: late.Add(time.Hour)})
	if err != nil || !won || got.State != carryover.IdempotencyPending || got.Answer != nil {
		t.Fatalf("reservation of an expired key: %+v won=%v err=%v", got, won, err)
	}
	if got, _ := s.GetIdempotencyKey(ctx, "a", "k1"); got.Fingerprint != "f4" || got.State != carryover.IdempotencyPending || got.Answer != nil {
		t.Fatalf("replaced record: %+v", got)
	}
	n, err := s.ExpireIdempotencyKeys(ctx, late)
	if err != nil || n != 1 { // b/k1 (expires at now+1h); a/k1 lives until late+1h
		t.Fatalf("expire: %d err=%v, want 1", n, err)
	}
	if _, err := s.GetIdempotencyKey(ctx, "b", "k1"); err == nil {
		t.Fatal("an expired key survived the GC")
	}
	if _, err := s.GetIdempotencyKey(ctx, "a", "k1"); err != nil {
		t.Fatalf("a live key went with the GC: %v", err)
	}
}

// testIdempotencyConcurrentReservations: of many reservations of one key at once, exactly one wins
// and every other gets the winner's record.
func testIdempotencyConcurrentReservations(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	now := time.Now().UTC()
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners, attempts := 0, map[string]int{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, won, err := s.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "a", Key: "k", Fingerprint: "f",
				Attempt: fmt.Sprint("p", i), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if won {
				winners++
			}
			attempts[got.Attempt]++
		}()
	}
	wg.Wait()
	if winners != 1 || len(attempts) != 1 {
		t.Fatalf("%d winners, records seen by attempt %v: want one winner whose record everyone got", winners, attempts)
	}
}

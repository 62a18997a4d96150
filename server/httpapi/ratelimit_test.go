package httpapi

import (
	"testing"
	"time"
)

// TestTokenBucket: a burst passes, the next request waits exactly as long as a token takes to
// refill, buckets are per credential, and a zero rate is no limiter.
func TestTokenBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLimiter(RateLimit{PerSecond: 2, Burst: 3}, func() time.Time { return now })
	for i := range 3 {
		if ok, _ := l.take("a"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.take("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th request: ok %v, wait %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.take("b"); !ok {
		t.Fatal("another credential's first request refused")
	}
	now = now.Add(250 * time.Millisecond)
	if ok, wait := l.take("a"); ok || wait != 250*time.Millisecond {
		t.Fatalf("after 250ms: ok %v, wait %v; want refused, 250ms", ok, wait)
	}
	now = now.Add(250 * time.Millisecond)
	if ok, _ := l.take("a"); !ok {
		t.Fatal("after a token refilled: refused")
	}
	now = now.Add(time.Hour) // refills to the burst, not beyond
	for i := range 3 {
		if ok, _ := l.take("a"); !ok {
			t.Fatalf("after an hour, request %d refused", i+1)
		}
	}
	if ok, _ := l.take("a"); ok {
		t.Fatal("an idle hour let more than the burst through")
	}
	var none *limiter = newLimiter(RateLimit{}, time.Now)
	if ok, _ := none.take("a"); !ok {
		t.Fatal("no rate limit refused a request")
	}
	if d := newLimiter(RateLimit{PerSecond: 2.5}, time.Now); d.burst != 3 {
		t.Fatalf("default burst of 2.5/s = %g, want 3", d.burst)
	}
}

// TestTokenBucketSweep: refilled buckets are dropped, so the map holds only recent credentials.
func TestTokenBucketSweep(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLimiter(RateLimit{PerSecond: 1, Burst: 1}, func() time.Time { return now })
	for _, id := range []string{"a", "b", "c"} {
		l.take(id)
	}
	now = now.Add(2 * time.Minute)
	l.take("d")
	if len(l.buckets) != 1 {
		t.Fatalf("%d buckets after a sweep, want only the new one", len(l.buckets))
	}
}

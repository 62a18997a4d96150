package capacity

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// TestFairShare: the node's slots over the tenants holding one or queueing for one.
func TestFairShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		max     int
		heldBy  map[string]int
		waiting []string
		want    float64
	}{
		{"one tenant", 4, map[string]int{"a": 4}, nil, 4},
		{"a waiting tenant counts", 4, map[string]int{"a": 4}, []string{"b"}, 2},
		{"each tenant once", 6, map[string]int{"a": 3, "b": 1}, []string{"a", "b", "c", "c"}, 2},
		{"a tenant holding none and not waiting does not count", 4, map[string]int{"a": 4, "b": 0}, nil, 4},
		{"no bound", 0, map[string]int{"a": 9}, []string{"b"}, math.Inf(1)},
		{"nobody", 4, nil, nil, math.Inf(1)},
	} {
		if got := fairShare(tc.max, tc.heldBy, waiters(tc.waiting...)); got != tc.want {
			t.Errorf("%s: share = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestQueueServesUnderShareFirst: the next claim served is the first queued of a tenant holding
// less than its share; when no tenant is under its share, the first queued.
func TestQueueServesUnderShareFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		heldBy  map[string]int
		waiting []string
		want    int // index in waiting
	}{
		{"a burst of a before b's one claim", map[string]int{"a": 4}, []string{"a", "a", "a", "b"}, 3},
		{"both at their share: arrival order", map[string]int{"a": 2, "b": 2}, []string{"b", "a"}, 0},
		{"the first under its share of three tenants", map[string]int{"a": 3, "b": 1}, []string{"a", "c", "b"}, 1},
		{"under its share by holding fewer", map[string]int{"a": 3, "b": 1}, []string{"a", "b"}, 1},
		{"one tenant: arrival order", map[string]int{"a": 4}, []string{"a", "a"}, 0},
	} {
		l := newLedger(4, time.Minute, 16)
		l.heldBy = tc.heldBy
		l.waiters = waiters(tc.waiting...)
		if got := slices.Index(l.waiters, l.nextLocked()); got != tc.want {
			t.Errorf("%s: next = %d (%s), want %d (%s)", tc.name, got, tc.waiting[got], tc.want, tc.waiting[tc.want])
		}
	}
}

// TestEvictionOrderFairShare: an idle session of a tenant over its share goes before everyone
// else's, even a less recently used one; within each group, no background processes first, then
// least recently used; busy ones never.
func TestEvictionOrderFairShare(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cand := func(id, tenant string, ago time.Duration, background, busy bool) Candidate[string] {
		return Candidate[string]{Item: id, Tenant: tenant, LastActivity: now.Add(-ago), Background: background, Busy: busy}
	}
	cands := []Candidate[string]{
		cand("b-old", "b", time.Hour, false, false),
		cand("a-new", "a", time.Second, false, false),
		cand("a-bg", "a", time.Hour, true, false),
		cand("a-old", "a", time.Minute, false, false),
		cand("a-busy", "a", 2*time.Hour, false, true),
		cand("c-old", "c", 2*time.Hour, false, false),
	}
	for _, tc := range []struct {
		name string
		over map[string]bool
		want []string
	}{
		{"a over its share", map[string]bool{"a": true}, []string{"a-old", "a-new", "a-bg", "c-old", "b-old"}},
		{"nobody over", nil, []string{"c-old", "b-old", "a-old", "a-new", "a-bg"}},
		{"a and b over", map[string]bool{"a": true, "b": true}, []string{"b-old", "a-old", "a-new", "a-bg", "c-old"}},
	} {
		var got []string
		got = append(got, EvictionOrder(cands, tc.over)...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: order = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestOverShare: the tenants holding more than their share, a queued tenant counted.
func TestOverShare(t *testing.T) {
	t.Parallel()
	l := newLedger(4, time.Minute, 16)
	l.heldBy = map[string]int{"a": 2, "b": 2}
	if got := l.OverShare(); len(got) != 0 {
		t.Errorf("4 slots, a and b holding 2 each (their share): over = %v", got)
	}
	l.heldBy = map[string]int{"a": 3, "b": 1}
	if got := l.OverShare(); !got["a"] || len(got) != 1 {
		t.Errorf("4 slots, a holding 3 and b 1 (share 2 each): over = %v, want a", got)
	}
	l.heldBy = map[string]int{"a": 4}
	l.waiters = waiters("b")
	if got := l.OverShare(); !got["a"] || len(got) != 1 {
		t.Errorf("a holding all 4 with b queued: over = %v, want a", got)
	}
}

// TestBurstDoesNotStarveAnotherTenant: tenant a holds every slot and queues a burst of claims;
// tenant b queues one claim after them. The slots a gives back go to b's claim first, then to a's
// in their order.
func TestBurstDoesNotStarveAnotherTenant(t *testing.T) {
	t.Parallel()
	l := newLedger(2, time.Minute, 16)
	ctx := context.Background()
	held := []*Lease{mustAcquire(t, l, "a"), mustAcquire(t, l, "a")}
	served := make(chan string, 4)
	claim := func(tenant string, n int) {
		go func() {
			if _, err := l.Acquire(ctx, Claim{Tenant: tenant}, nil); err != nil {
				t.Errorf("claim of %s: %v", tenant, err)
			}
			served <- tenant
		}()
		waitFor(t, "claim queued", func() bool { return l.Stats().Queued == n })
	}
	claim("a", 1)
	claim("a", 2)
	claim("b", 3)
	var order []string
	for i := range 3 {
		if i < 2 {
			held[i].Release()
		} else {
			l.release("a") // one of the leases a's queued claims took
		}
		order = append(order, <-served)
	}
	if !slices.Equal(order, []string{"b", "a", "a"}) {
		t.Errorf("slots went to %v, want b's claim first", order)
	}
}

// waiters is one queued claim per tenant named, in that order.
func waiters(tenants ...string) []*waiter {
	out := make([]*waiter, len(tenants))
	for i, t := range tenants {
		out[i] = &waiter{wake: make(chan struct{}, 1), tenant: t}
	}
	return out
}

package capacity

import (
	"context"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/prometheus/client_golang/prometheus"
)

// newLedger is a ledger of max slots, wait queue time and queueMax places, metrics nowhere.
func newLedger(max int, wait time.Duration, queueMax int) *Ledger {
	return New(Config{Max: max, Wait: wait, QueueMax: queueMax})
}

// mustAcquire takes a lease of tenant or fails the test.
func mustAcquire(t *testing.T, l *Ledger, tenant string) *Lease {
	t.Helper()
	le, err := l.Acquire(context.Background(), Claim{Tenant: tenant}, nil)
	if err != nil {
		t.Fatalf("acquire for %s: %v", tenant, err)
	}
	return le
}

// wantCode fails unless err is a *carryover.Error of code.
func wantCode(t *testing.T, err error, code carryover.Code) {
	t.Helper()
	var e *carryover.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want a *carryover.Error of code %s", err, code)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSlotsFreeThenRefused: slots are free up to max; beyond it a claim with nothing to evict waits
// the queue time, then gets 429 capacity saying why, with retry_after_seconds.
func TestSlotsFreeThenRefused(t *testing.T) {
	t.Parallel()
	l := newLedger(2, 50*time.Millisecond, 8)
	for range 2 {
		mustAcquire(t, l, "t")
	}
	var tried atomic.Int32
	_, err := l.Acquire(context.Background(), Claim{Tenant: "t"}, func(context.Context) bool { tried.Add(1); return false })
	wantCode(t, err, carryover.CodeCapacity)
	e := carryover.ErrorOf(err)
	if e.Details["live"] != 2 || e.Details["capacity"] != 2 || e.Details["retry_after_seconds"] != 1 || e.Details["reason"] != "busy" {
		t.Errorf("details = %v", e.Details)
	}
	if tried.Load() == 0 {
		t.Error("the queued claim never tried to evict an idle session")
	}
	if st := l.Stats(); st.Held != 2 || st.Queued != 0 || st.Refused["busy"] != 1 {
		t.Errorf("stats after the refusal = %+v", st)
	}
}

// TestSlotsReleaseLetsTheHeadIn: a slot released inside the queue time goes to the waiting claim,
// and waiting claims are served in arrival order; a lease released twice gives one slot back.
func TestSlotsReleaseLetsTheHeadIn(t *testing.T) {
	t.Parallel()
	l := newLedger(1, time.Minute, 8)
	first := mustAcquire(t, l, "t")
	order := make(chan int, 2)
	leases := make(chan *Lease, 2)
	for i := range 2 {
		go func() {
			le, err := l.Acquire(context.Background(), Claim{Tenant: "t"}, nil)
			if err != nil {
				t.Errorf("claim %d: %v", i, err)
			}
			leases <- le
			order <- i
		}()
		waitFor(t, "claim queued", func() bool { return l.Stats().Queued == i+1 }) // queued in this order
	}
	first.Release()
	first.Release() // no second slot
	if got := <-order; got != 0 {
		t.Fatalf("claim %d went first; the first queued should", got)
	}
	if st := l.Stats(); st.Held != 1 || st.Queued != 1 {
		t.Fatalf("after one release (twice): %+v, want 1 held and 1 queued", st)
	}
	(<-leases).Release()
	if got := <-order; got != 1 {
		t.Fatalf("second claim = %d", got)
	}
	if st := l.Stats(); st.Held != 1 || st.Queued != 0 || st.QueuedTotal != 2 {
		t.Errorf("stats = %+v", st)
	}
}

// TestSlotsEvictFreesASlot: on a full node, a claim whose evict hibernates a session (which
// releases its lease) gets that slot without waiting for the queue time.
func TestSlotsEvictFreesASlot(t *testing.T) {
	t.Parallel()
	l := newLedger(1, time.Hour, 8)
	held := mustAcquire(t, l, "t")
	done := make(chan error, 1)
	go func() {
		_, err := l.Acquire(context.Background(), Claim{Tenant: "t"}, func(context.Context) bool { held.Release(); return true })
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not take the evicted session's slot")
	}
	if st := l.Stats(); st.Held != 1 {
		t.Errorf("held = %d, want 1", st.Held)
	}
}

// TestSlotsQueueBoundAndCancel: beyond queue_max a claim is refused at once (queue_full); a claim
// whose context ends leaves the queue with the context's error.
func TestSlotsQueueBoundAndCancel(t *testing.T) {
	t.Parallel()
	l := newLedger(1, time.Hour, 1)
	mustAcquire(t, l, "t")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := l.Acquire(ctx, Claim{Tenant: "t"}, nil); done <- err }()
	waitFor(t, "claim queued", func() bool { return l.Stats().Queued == 1 })
	_, err := l.Acquire(context.Background(), Claim{Tenant: "t"}, nil)
	wantCode(t, err, carryover.CodeCapacity)
	if r := carryover.ErrorOf(err).Details["reason"]; r != "queue_full" {
		t.Errorf("reason = %v, want queue_full", r)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled claim: %v", err)
	}
	if st := l.Stats(); st.Queued != 0 || st.Held != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// TestSlotsUnlimited: max <= 0 never queues.
func TestSlotsUnlimited(t *testing.T) {
	t.Parallel()
	l := newLedger(0, 0, 1)
	for range 100 {
		mustAcquire(t, l, "t")
	}
	if st := l.Stats(); st.Held != 100 {
		t.Errorf("held = %d", st.Held)
	}
}

// TestTenantLimitFirst: a claim of a tenant at its limit (its leases and its queued claims) is
// quota_exceeded naming live_kernels, at once, before any slot or eviction, and leaves the ledger as
// it was; a rotation's claim (Replaces) does not count the lease it replaces; another tenant is not
// limited.
func TestTenantLimitFirst(t *testing.T) {
	t.Parallel()
	l := newLedger(2, time.Hour, 8)
	held := mustAcquire(t, l, "a")
	before := l.Stats()
	var evicted atomic.Int32
	_, err := l.Acquire(context.Background(), Claim{Tenant: "a", Limit: 1}, func(context.Context) bool { evicted.Add(1); return true })
	wantCode(t, err, carryover.CodeQuotaExceeded)
	if e := carryover.ErrorOf(err); e.Details["quota"] != carryover.QuotaLiveKernels || e.Details["limit"] != 1 || e.Details["use"] != 1 {
		t.Errorf("details = %v", e.Details)
	}
	if after := l.Stats(); after.Held != before.Held || after.Queued != 0 || len(after.Refused) != 0 || evicted.Load() != 0 || l.HeldBy("a") != 1 {
		t.Errorf("a refusal changed the ledger: %+v -> %+v (evictions %d)", before, after, evicted.Load())
	}
	next, err := l.Acquire(context.Background(), Claim{Tenant: "a", Limit: 1, Replaces: held}, nil)
	if err != nil {
		t.Fatalf("a rotation's claim at the limit: %v", err)
	}
	held.Release()
	if n := l.HeldBy("a"); n != 1 {
		t.Errorf("after the rotation a holds %d, want 1", n)
	}
	next.Release()
	mustAcquire(t, l, "b")
	mustAcquire(t, l, "b")
	// A queued claim of a counts against its limit: a second one is refused while it waits.
	go func() { _, _ = l.Acquire(context.Background(), Claim{Tenant: "a", Limit: 1}, nil) }()
	waitFor(t, "claim queued", func() bool { return l.Stats().Queued == 1 })
	_, err = l.Acquire(context.Background(), Claim{Tenant: "a", Limit: 1}, nil)
	wantCode(t, err, carryover.CodeQuotaExceeded)
}

// TestMetricsOnTheGivenRegistry: the ledger's metrics are on the registry it is given, two ledgers
// on one registry share them, and a ledger without one registers nothing.
func TestMetricsOnTheGivenRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	l := New(Config{Max: 1, Wait: time.Millisecond, Metrics: reg})
	New(Config{Max: 1, Metrics: reg}) // a second service of the process: no panic
	mustAcquire(t, l, "t")
	_, err := l.Acquire(context.Background(), Claim{Tenant: "t"}, nil)
	wantCode(t, err, carryover.CodeCapacity)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, lp := range m.GetLabel() {
				name += "{" + lp.GetName() + "=" + lp.GetValue() + "}"
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"carryover_capacity_max_live_kernels": 1, "carryover_capacity_queued": 0,
		"carryover_capacity_refusals_total{reason=busy}": 1}
	if !maps.Equal(got, want) {
		t.Errorf("metrics = %v, want %v", got, want)
	}
}

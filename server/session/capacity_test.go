package session

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestSlotsFreeThenRefused: slots are free up to max; beyond it a claim with nothing to evict waits
// the queue time, then gets 429 capacity saying why, with retry_after_seconds.
func TestSlotsFreeThenRefused(t *testing.T) {
	t.Parallel()
	sl := newSlots(2, 50*time.Millisecond, 8)
	ctx := context.Background()
	for i := range 2 {
		if err := sl.acquire(ctx, "t", nil); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
	}
	var tried atomic.Int32
	err := sl.acquire(ctx, "t", func(context.Context) bool { tried.Add(1); return false })
	wantCode(t, err, carryover.CodeCapacity)
	e := carryover.ErrorOf(err)
	if e.Details["live"] != 2 || e.Details["capacity"] != 2 || e.Details["retry_after_seconds"] != 1 || e.Details["reason"] != "busy" {
		t.Errorf("details = %v", e.Details)
	}
	if tried.Load() == 0 {
		t.Error("the queued claim never tried to evict an idle session")
	}
	if st := sl.stats(); st.Held != 2 || st.Queued != 0 || st.Refused["busy"] != 1 {
		t.Errorf("stats after the refusal = %+v", st)
	}
}

// TestSlotsReleaseLetsTheHeadIn: a slot released inside the queue time goes to the waiting claim,
// and waiting claims are served in arrival order.
func TestSlotsReleaseLetsTheHeadIn(t *testing.T) {
	t.Parallel()
	sl := newSlots(1, time.Minute, 8)
	ctx := context.Background()
	if err := sl.acquire(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	for i := range 2 {
		go func() {
			if err := sl.acquire(ctx, "t", nil); err != nil {
				t.Errorf("claim %d: %v", i, err)
			}
			order <- i
		}()
		waitFor(t, "claim queued", func() bool { return sl.stats().Queued == i+1 }) // queued in this order
	}
	sl.release("t")
	if got := <-order; got != 0 {
		t.Fatalf("claim %d went first; the first queued should", got)
	}
	sl.release("t")
	if got := <-order; got != 1 {
		t.Fatalf("second claim = %d", got)
	}
	if st := sl.stats(); st.Held != 1 || st.Queued != 0 || st.QueuedTotal != 2 {
		t.Errorf("stats = %+v", st)
	}
}

// TestSlotsEvictFreesASlot: on a full node, a claim whose evict hibernates a session (which
// releases its slot) gets that slot without waiting for the queue time.
func TestSlotsEvictFreesASlot(t *testing.T) {
	t.Parallel()
	sl := newSlots(1, time.Hour, 8)
	ctx := context.Background()
	if err := sl.acquire(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sl.acquire(ctx, "t", func(context.Context) bool { sl.release("t"); return true }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not take the evicted session's slot")
	}
	if st := sl.stats(); st.Held != 1 {
		t.Errorf("held = %d, want 1", st.Held)
	}
}

// TestSlotsQueueBoundAndCancel: beyond queue_max a claim is refused at once (queue_full); a claim
// whose context ends leaves the queue with the context's error.
func TestSlotsQueueBoundAndCancel(t *testing.T) {
	t.Parallel()
	sl := newSlots(1, time.Hour, 1)
	if err := sl.acquire(context.Background(), "t", nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sl.acquire(ctx, "t", nil) }()
	waitFor(t, "claim queued", func() bool { return sl.stats().Queued == 1 })
	err := sl.acquire(context.Background(), "t", nil)
	wantCode(t, err, carryover.CodeCapacity)
	if r := carryover.ErrorOf(err).Details["reason"]; r != "queue_full" {
		t.Errorf("reason = %v, want queue_full", r)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled claim: %v", err)
	}
	if st := sl.stats(); st.Queued != 0 || st.Held != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// TestSlotsUnlimited: max <= 0 never queues.
func TestSlotsUnlimited(t *testing.T) {
	t.Parallel()
	sl := newSlots(0, 0, 1)
	for range 100 {
		if err := sl.acquire(context.Background(), "t", nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := sl.stats(); st.Held != 100 {
		t.Errorf("held = %d", st.Held)
	}
}

// TestEvictionOrder: busy sessions never; without background processes first; then least
// recently active first.
func TestEvictionOrder(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b, c, d := &liveSession{id: "a"}, &liveSession{id: "b"}, &liveSession{id: "c"}, &liveSession{id: "d"}
	got := evictionOrder([]evictCandidate{
		{ls: a, lastActivity: now.Add(-time.Minute)},
		{ls: b, lastActivity: now.Add(-time.Hour), busy: true},
		{ls: c, lastActivity: now.Add(-2 * time.Minute)},
		{ls: d, lastActivity: now.Add(-3 * time.Hour), background: true},
	}, nil)
	var ids []string
	for _, ls := range got {
		ids = append(ids, ls.id)
	}
	if len(ids) != 3 || ids[0] != "c" || ids[1] != "a" || ids[2] != "d" {
		t.Errorf("order = %v, want [c a d]", ids)
	}
}

// TestMemoryExcess: over the budget, under the reserve, PSI over its threshold.
func TestMemoryExcess(t *testing.T) {
	t.Parallel()
	noHost := HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}
	for _, tc := range []struct {
		name              string
		used, budget, rsv int64
		h                 HostMemory
		psi               float64
		want              int64
	}{
		{"under budget", 100, 200, 0, noHost, 10, 0},
		{"over budget", 300, 200, 0, noHost, 10, 100},
		{"no budget", 300, 0, 0, noHost, 10, 0},
		{"host short of its reserve", 100, 200, 1000, HostMemory{AvailableBytes: 400, PSIFullAvg10: -1}, 10, 600},
		{"psi over threshold", 100, 200, 0, HostMemory{AvailableBytes: -1, PSIFullAvg10: 12}, 10, 50},
		{"psi off", 100, 200, 0, HostMemory{AvailableBytes: -1, PSIFullAvg10: 90}, 0, 0},
	} {
		if got := memoryExcess(tc.used, tc.budget, tc.h, tc.rsv, tc.psi, 50); got != tc.want {
			t.Errorf("%s: excess = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := psiFullAvg10([]byte("some avg10=1.50 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=2\n")); got != 0.75 {
		t.Errorf("psiFullAvg10 = %v", got)
	}
}

// TestResolveBudget: configured values stand; zeros are derived from the host's room.
func TestResolveBudget(t *testing.T) {
	t.Parallel()
	gib := int64(1 << 30)
	b := resolveBudget(Config{MemoryReserve: gib, KernelBytes: 100 << 20, PoolMaxSize: 4}, 11*gib)
	if b.memory != 10*gib || b.maxLive != 102-4 || b.source != "derived" {
		t.Errorf("derived = %+v", b)
	}
	b = resolveBudget(Config{MaxLiveKernels: 4, MemoryBudget: gib}, 11*gib)
	if b.maxLive != 4 || b.memory != gib || b.kernelBytes != defaultKernelBytes || b.source != "config" {
		t.Errorf("configured = %+v", b)
	}
	if b = resolveBudget(Config{MaxLiveKernels: -1}, 11*gib); b.maxLive != 0 {
		t.Errorf("no limit = %+v", b)
	}
	if b = resolveBudget(Config{MemoryReserve: 2 * gib}, gib); b.maxLive != 1 {
		t.Errorf("a host with no room still holds one kernel: %+v", b)
	}
}

// TestStatusOfAnEmptyNode: the status endpoint's figures, and the load a cluster node publishes, on a
// node with one pending session.
func TestStatusOfAnEmptyNode(t *testing.T) {
	t.Parallel()
	s, _, _ := testService(t, func(c *Config) { c.MaxLiveKernels = 3; c.QueueWait = 2 * time.Second })
	mustCreate(t, s, CreateRequest{})
	st := s.Status()
	if st.Capacity.MaxLiveKernels != 3 || st.Capacity.LiveKernels != 0 || st.Capacity.QueueSeconds != 2 || st.Sessions.Total != 1 || st.Sessions.Live != 0 {
		t.Errorf("status = %+v", st)
	}
	if l := s.Load(); l != (carryover.NodeLoad{Capacity: 3}) {
		t.Errorf("load = %+v: a pending session holds no kernel", l)
	}
}

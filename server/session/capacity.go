package session

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// A node holds at most capacity.max_live_kernels kernels attached to sessions (docs/capacity.md).
// Every kernel the service claims for a session (a new session's, a hibernated one's wake, a
// rotation's, a checkpoint restore's, an ephemeral run's) takes a slot first (takeKernel) and gives
// it back when it is stopped (stopKernel): a slot is held exactly while kernelsLive counts the kernel.
// When the node is full, the claim hibernates the least recently used idle session (checkpointed
// first: nothing is lost; a tenant over its fair share first, capacity_share.go) and takes its
// slot; when every live kernel is busy, it waits in a bounded queue for capacity.queue_seconds (a
// tenant under its fair share before one over it, else in arrival order), then answers 429 capacity
// with a Retry-After.

// slots counts the node's live-kernel slots, per tenant, and queues the claims that find none free.
// It knows nothing of sessions: what frees a slot when none is free is the evict function its caller
// passes.
type slots struct {
	max      int           // <= 0: unlimited
	wait     time.Duration // capacity.queue_seconds
	queueMax int           // the queue's bound; a claim beyond it is refused at once
	poll     time.Duration // how often the queue's next claim looks for an idle session to evict anyway

	mu      sync.Mutex
	held    int
	heldBy  map[string]int // slots held per tenant (the fair share's count)
	waiters []*slotWaiter  // in arrival order; only the next (nextLocked) tries to take or free a slot
	refused map[string]int64
	queuedN int64 // claims that had to queue, ever
}

// slotWaiter is one queued claim of tenant; wake is poked (1-slot, never blocks) when something
// changed.
type slotWaiter struct {
	wake   chan struct{}
	tenant string
}

func newSlots(max int, wait time.Duration, queueMax int) *slots {
	if queueMax <= 0 {
		queueMax = 1
	}
	return &slots{max: max, wait: wait, queueMax: queueMax, poll: 250 * time.Millisecond, refused: map[string]int64{},
		heldBy: map[string]int{}}
}

// evictFunc frees one slot by hibernating an idle session, reporting whether it did.
type evictFunc func(ctx context.Context) bool

// acquire takes a slot for tenant: a free one at once when nobody queues, else one freed by evict
// (tried by the queue's next claim on arrival, on every poke and every poll), else a capacity error
// once the queue time is over (or at once when the queue is full). ctx ending leaves the queue.
func (sl *slots) acquire(ctx context.Context, tenant string, evict evictFunc) error {
	sl.mu.Lock()
	if sl.max <= 0 || (len(sl.waiters) == 0 && sl.held < sl.max) {
		sl.takeLocked(tenant)
		sl.mu.Unlock()
		return nil
	}
	if len(sl.waiters) >= sl.queueMax {
		err := sl.refuseLocked("queue_full")
		sl.mu.Unlock()
		return err
	}
	w := &slotWaiter{wake: make(chan struct{}, 1), tenant: tenant}
	sl.waiters = append(sl.waiters, w)
	sl.queuedN++
	sl.mu.Unlock()
	capacityQueued.Inc()
	defer capacityQueued.Dec()

	deadline := time.NewTimer(sl.wait)
	defer deadline.Stop()
	tick := time.NewTicker(sl.poll)
	defer tick.Stop()
	for {
		if sl.isHead(w) {
			if sl.takeAsHead(w) {
				return nil
			}
			if evict != nil && evict(ctx) {
				continue // its slot is free now (or about to be): take it
			}
		}
		select {
		case <-w.wake:
		case <-tick.C:
		case <-deadline.C:
			return sl.leave(w, true)
		case <-ctx.Done():
			_ = sl.leave(w, false)
			return ctx.Err()
		}
	}
}

// isHead says whether w is the queue's next claim (nextLocked).
func (sl *slots) isHead(w *slotWaiter) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.nextLocked() == w
}

// takeAsHead takes a free slot for the queue's next claim w, and lets the one after it try.
func (sl *slots) takeAsHead(w *slotWaiter) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.held >= sl.max || sl.nextLocked() != w {
		return false
	}
	sl.takeLocked(w.tenant)
	sl.removeLocked(w)
	sl.pokeHeadLocked()
	return true
}

// takeLocked counts a slot taken by tenant.
func (sl *slots) takeLocked(tenant string) {
	sl.held++
	sl.heldBy[tenant]++
}

// removeLocked takes w out of the queue.
func (sl *slots) removeLocked(w *slotWaiter) {
	for i, x := range sl.waiters {
		if x == w {
			sl.waiters = append(sl.waiters[:i:i], sl.waiters[i+1:]...)
			return
		}
	}
}

// leave takes w out of the queue; with refuse, the answer is the capacity error.
func (sl *slots) leave(w *slotWaiter, refuse bool) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.removeLocked(w)
	sl.pokeHeadLocked()
	if !refuse {
		return nil
	}
	return sl.refuseLocked("busy")
}

// release gives a slot of tenant back and wakes the queue's next claim.
func (sl *slots) release(tenant string) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.held > 0 {
		sl.held--
	}
	if sl.heldBy[tenant] > 1 {
		sl.heldBy[tenant]--
	} else {
		delete(sl.heldBy, tenant)
	}
	sl.pokeHeadLocked()
}

// poke wakes the queue's next claim: a turn ended, so an idle session may be there to evict.
func (sl *slots) poke() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.pokeHeadLocked()
}

func (sl *slots) pokeHeadLocked() {
	w := sl.nextLocked()
	if w == nil {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// refuseLocked counts a refusal and builds its error: 429 capacity, saying why, with the seconds a
// client should wait (details.retry_after_seconds, the Retry-After header).
func (sl *slots) refuseLocked(reason string) error {
	sl.refused[reason]++
	capacityRefusals.WithLabelValues(reason).Inc()
	retry := int(math.Max(1, math.Ceil(sl.wait.Seconds())))
	var msg string
	if reason == "queue_full" {
		msg = fmt.Sprintf("the node is at capacity: %d of %d kernels busy and %d requests already queued; retry in %d s",
			sl.held, sl.max, len(sl.waiters), retry)
	} else {
		msg = fmt.Sprintf("the node is at capacity: %d of %d kernels busy for the %s this request queued; retry in %d s",
			sl.held, sl.max, sl.wait.Round(time.Millisecond), retry)
	}
	return carryover.Errorf(carryover.CodeCapacity, "%s", msg).WithDetails(
		"reason", reason, "live", sl.held, "capacity", sl.max, "queued", len(sl.waiters), "retry_after_seconds", retry)
}

// slotStats is what the status endpoint shows of the slots.
type slotStats struct {
	Held, Max, Queued int
	QueuedTotal       int64
	Refused           map[string]int64
}

func (sl *slots) stats() slotStats {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	ref := make(map[string]int64, len(sl.refused))
	for k, v := range sl.refused {
		ref[k] = v
	}
	return slotStats{Held: sl.held, Max: sl.max, Queued: len(sl.waiters), QueuedTotal: sl.queuedN, Refused: ref}
}

// acquireSlot takes a live-kernel slot for a claim of tenant, hibernating the least recently used
// idle session (of a tenant over its fair share first) when the node is full (reason capacity).
func (s *Service) acquireSlot(ctx context.Context, tenant string) error {
	err := s.slots.acquire(ctx, tenant, func(ctx context.Context) bool {
		_, ok := s.evictIdle(ctx, reasonCapacity)
		return ok
	})
	return inFullCluster(ctx, err)
}

// takeKernel is a slot, then a kernel (claimKernel), counted live; stopKernel gives both back.
func (s *Service) takeKernel(ctx context.Context, doc carryover.Session, runEnv map[string]string) (*kernel.Kernel, error) {
	tenant := doc.TenantName()
	if err := s.acquireSlot(ctx, tenant); err != nil {
		return nil, err
	}
	k, err := s.claimKernel(ctx, doc, runEnv)
	if err != nil {
		s.slots.release(tenant)
		return nil, s.startFailed(ctx, err) // capacity_start.go
	}
	s.kernelTaken(k, tenant)
	return k, nil
}

// kernelTaken counts k live, holding a slot of tenant until stopKernel gives it back.
func (s *Service) kernelTaken(k *kernel.Kernel, tenant string) {
	s.slotHolders.Store(k, tenant)
	kernelsLive.Inc()
}

// releaseSlotOf gives back the slot k held (kernelTaken).
func (s *Service) releaseSlotOf(k *kernel.Kernel) {
	t, _ := s.slotHolders.LoadAndDelete(k)
	tenant, _ := t.(string)
	s.slots.release(tenant)
}

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
// first: nothing is lost) and takes its slot; when every live kernel is busy, it waits in a bounded
// FIFO queue for capacity.queue_seconds, then answers 429 capacity with a Retry-After.

// slots counts the node's live-kernel slots and queues the claims that find none free. It knows
// nothing of sessions: what frees a slot when none is free is the evict function its caller passes.
type slots struct {
	max      int           // <= 0: unlimited
	wait     time.Duration // capacity.queue_seconds
	queueMax int           // the queue's bound; a claim beyond it is refused at once
	poll     time.Duration // how often the queue's head looks for an idle session to evict anyway

	mu      sync.Mutex
	held    int
	waiters []*slotWaiter // FIFO; only the head tries to take or free a slot
	refused map[string]int64
	queuedN int64 // claims that had to queue, ever
}

// slotWaiter is one queued claim; wake is poked (1-slot, never blocks) when something changed.
type slotWaiter struct{ wake chan struct{} }

func newSlots(max int, wait time.Duration, queueMax int) *slots {
	if queueMax <= 0 {
		queueMax = 1
	}
	return &slots{max: max, wait: wait, queueMax: queueMax, poll: 250 * time.Millisecond, refused: map[string]int64{}}
}

// evictFunc frees one slot by hibernating an idle session, reporting whether it did.
type evictFunc func(ctx context.Context) bool

// acquire takes a slot: a free one at once when nobody queues before it, else one freed by evict
// (tried by the queue's head on arrival, on every poke and every poll), else a capacity error once
// the queue time is over (or at once when the queue is full). ctx ending leaves the queue.
func (sl *slots) acquire(ctx context.Context, evict evictFunc) error {
	sl.mu.Lock()
	if sl.max <= 0 || (len(sl.waiters) == 0 && sl.held < sl.max) {
		sl.held++
		sl.mu.Unlock()
		return nil
	}
	if len(sl.waiters) >= sl.queueMax {
		err := sl.refuseLocked("queue_full")
		sl.mu.Unlock()
		return err
	}
	w := &slotWaiter{wake: make(chan struct{}, 1)}
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

// isHead says whether w is first in the queue.
func (sl *slots) isHead(w *slotWaiter) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return len(sl.waiters) > 0 && sl.waiters[0] == w
}

// takeAsHead takes a free slot for the queue's head w, and lets the next waiter try.
func (sl *slots) takeAsHead(w *slotWaiter) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.held >= sl.max || len(sl.waiters) == 0 || sl.waiters[0] != w {
		return false
	}
	sl.held++
	sl.waiters = sl.waiters[1:]
	sl.pokeHeadLocked()
	return true
}

// leave takes w out of the queue; with refuse, the answer is the capacity error.
func (sl *slots) leave(w *slotWaiter, refuse bool) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	for i, x := range sl.waiters {
		if x == w {
			sl.waiters = append(sl.waiters[:i:i], sl.waiters[i+1:]...)
			break
		}
	}
	sl.pokeHeadLocked()
	if !refuse {
		return nil
	}
	return sl.refuseLocked("busy")
}

// release gives a slot back and wakes the queue's head.
func (sl *slots) release() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.held > 0 {
		sl.held--
	}
	sl.pokeHeadLocked()
}

// poke wakes the queue's head: a turn ended, so an idle session may be there to evict.
func (sl *slots) poke() {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.pokeHeadLocked()
}

func (sl *slots) pokeHeadLocked() {
	if len(sl.waiters) == 0 {
		return
	}
	select {
	case sl.waiters[0].wake <- struct{}{}:
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

// acquireSlot takes a live-kernel slot for a claim, hibernating the least recently used idle
// session when the node is full (reason capacity).
func (s *Service) acquireSlot(ctx context.Context) error {
	err := s.slots.acquire(ctx, func(ctx context.Context) bool {
		_, ok := s.evictIdle(ctx, reasonCapacity)
		return ok
	})
	return inFullCluster(ctx, err)
}

// takeKernel is a slot, then a kernel (claimKernel), counted live; stopKernel gives both back.
func (s *Service) takeKernel(ctx context.Context, doc carryover.Session, runEnv map[string]string) (*kernel.Kernel, error) {
	if err := s.acquireSlot(ctx); err != nil {
		return nil, err
	}
	k, err := s.claimKernel(ctx, doc, runEnv)
	if err != nil {
		s.slots.release()
		return nil, err
	}
	kernelsLive.Inc()
	return k, nil
}

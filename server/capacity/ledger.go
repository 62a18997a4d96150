package capacity

import (
	"context"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/prometheus/client_golang/prometheus"
)

// Config sizes a Ledger.
type Config struct {
	Max      int           // live kernels the node holds at most; <= 0: unlimited
	Wait     time.Duration // how long a claim queues for a slot (capacity.queue_seconds)
	QueueMax int           // the queue's bound; a claim beyond it is refused at once (<= 0: 1)
	// Poll is how often the queue's next claim looks for an idle session to evict anyway (0: 250 ms).
	Poll time.Duration
	// Metrics is where the ledger's metrics are registered; nil: nowhere (a unit test's).
	Metrics prometheus.Registerer
}

// Claim is one request for a live kernel.
type Claim struct {
	Tenant string
	// Limit is the tenant's live_kernels quota; <= 0: none. The tenant's leases and its claims queued
	// count against it, so concurrent claims cannot all pass.
	Limit int
	// Replaces is the lease of the kernel the claimed one replaces (a rotation: the old kernel lives
	// until the new one is up). It does not count against Limit; it still holds its node slot.
	Replaces *Lease
}

// EvictFunc frees one slot by hibernating an idle session, reporting whether it did. The session's
// kernel is stopped, so its lease is released, before it returns true.
type EvictFunc func(ctx context.Context) bool

// Ledger counts the node's live kernels per tenant and queues the claims that find no slot free. It
// knows nothing of sessions: what frees a slot on a full node is the evict function of the claim.
type Ledger struct {
	max      int
	wait     time.Duration
	queueMax int
	poll     time.Duration
	m        metrics

	mu      sync.Mutex
	held    int
	heldBy  map[string]int // leases per tenant (the fair share's and the tenant limit's count)
	waiters []*waiter      // in arrival order; only the next (nextLocked) tries to take or free a slot
	refused map[string]int64
	queuedN int64 // claims that had to queue, ever
}

// waiter is one queued claim of tenant; wake is poked (1-slot, never blocks) when something changed.
type waiter struct {
	wake   chan struct{}
	tenant string
}

// Lease is one live kernel of a tenant, held until Release.
type Lease struct {
	l      *Ledger
	tenant string
	once   sync.Once
}

// Tenant is the tenant the lease counts for.
func (le *Lease) Tenant() string { return le.tenant }

// Release gives the lease's slot back and wakes the queue's next claim. Only the first call counts.
func (le *Lease) Release() {
	if le == nil {
		return
	}
	le.once.Do(func() { le.l.release(le.tenant) })
}

// New returns an empty ledger.
func New(c Config) *Ledger {
	if c.QueueMax <= 0 {
		c.QueueMax = 1
	}
	if c.Poll <= 0 {
		c.Poll = 250 * time.Millisecond
	}
	l := &Ledger{max: c.Max, wait: c.Wait, queueMax: c.QueueMax, poll: c.Poll, m: newMetrics(c.Metrics),
		heldBy: map[string]int{}, refused: map[string]int64{}}
	l.m.max.Set(float64(max(c.Max, 0)))
	return l
}

// Acquire takes a lease for claim c: refused with quota_exceeded when the tenant is at its limit;
// else a free slot at once when nobody queues, else one freed by evict (tried by the queue's next
// claim on arrival, on every poke and every poll), else a capacity error once the queue time is
// over (or at once when the queue is full). ctx ending leaves the queue with its error. Whatever
// refuses the claim leaves the ledger as it was.
func (l *Ledger) Acquire(ctx context.Context, c Claim, evict EvictFunc) (*Lease, error) {
	l.mu.Lock()
	if err := l.overLimitLocked(c); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	if l.max <= 0 || (len(l.waiters) == 0 && l.held < l.max) {
		l.takeLocked(c.Tenant)
		l.mu.Unlock()
		return l.lease(c.Tenant), nil
	}
	if len(l.waiters) >= l.queueMax {
		err := l.refuseLocked(reasonQueueFull)
		l.mu.Unlock()
		return nil, err
	}
	w := &waiter{wake: make(chan struct{}, 1), tenant: c.Tenant}
	l.waiters = append(l.waiters, w)
	l.queuedN++
	l.mu.Unlock()
	l.m.queued.Inc()
	defer l.m.queued.Dec()
	if err := l.queue(ctx, w, evict); err != nil {
		return nil, err
	}
	return l.lease(c.Tenant), nil
}

// overLimitLocked is the tenant's quota_exceeded when its leases and queued claims (the replaced
// lease left out) are at c.Limit.
func (l *Ledger) overLimitLocked(c Claim) error {
	if c.Limit <= 0 {
		return nil
	}
	n := l.heldBy[c.Tenant]
	if c.Replaces != nil && c.Replaces.tenant == c.Tenant {
		n--
	}
	for _, w := range l.waiters {
		if w.tenant == c.Tenant {
			n++
		}
	}
	if n >= c.Limit {
		return carryover.QuotaError(c.Tenant, carryover.QuotaLiveKernels, c.Limit, n)
	}
	return nil
}

// queue waits in the queue until w takes a slot, the queue time is over or ctx ends.
func (l *Ledger) queue(ctx context.Context, w *waiter, evict EvictFunc) error {
	deadline := time.NewTimer(l.wait)
	defer deadline.Stop()
	tick := time.NewTicker(l.poll)
	defer tick.Stop()
	for {
		if l.isHead(w) {
			if l.takeAsHead(w) {
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
			return l.leave(w, true)
		case <-ctx.Done():
			_ = l.leave(w, false)
			return ctx.Err()
		}
	}
}

func (l *Ledger) lease(tenant string) *Lease { return &Lease{l: l, tenant: tenant} }

// isHead says whether w is the queue's next claim (nextLocked).
func (l *Ledger) isHead(w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextLocked() == w
}

// takeAsHead takes a free slot for the queue's next claim w, and lets the one after it try.
func (l *Ledger) takeAsHead(w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held >= l.max || l.nextLocked() != w {
		return false
	}
	l.takeLocked(w.tenant)
	l.removeLocked(w)
	l.pokeHeadLocked()
	return true
}

// takeLocked counts a slot taken by tenant.
func (l *Ledger) takeLocked(tenant string) {
	l.held++
	l.heldBy[tenant]++
}

// removeLocked takes w out of the queue.
func (l *Ledger) removeLocked(w *waiter) {
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i:i], l.waiters[i+1:]...)
			return
		}
	}
}

// leave takes w out of the queue; with refuse, the answer is the capacity error.
func (l *Ledger) leave(w *waiter, refuse bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(w)
	l.pokeHeadLocked()
	if !refuse {
		return nil
	}
	return l.refuseLocked(reasonBusy)
}

// release gives a slot of tenant back and wakes the queue's next claim.
func (l *Ledger) release(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held > 0 {
		l.held--
	}
	if l.heldBy[tenant] > 1 {
		l.heldBy[tenant]--
	} else {
		delete(l.heldBy, tenant)
	}
	l.pokeHeadLocked()
}

// Poke wakes the queue's next claim: a turn ended, so an idle session may be there to evict.
func (l *Ledger) Poke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pokeHeadLocked()
}

func (l *Ledger) pokeHeadLocked() {
	w := l.nextLocked()
	if w == nil {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stats is what the status endpoint and a cluster node's load show of the ledger.
type Stats struct {
	Held, Max, Queued int
	QueuedTotal       int64
	Refused           map[string]int64 // 429 capacity answers since start, by reason
}

// Stats are the ledger's figures now.
func (l *Ledger) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	ref := make(map[string]int64, len(l.refused))
	for k, v := range l.refused {
		ref[k] = v
	}
	return Stats{Held: l.held, Max: l.max, Queued: len(l.waiters), QueuedTotal: l.queuedN, Refused: ref}
}

// HeldBy is the number of leases tenant holds.
func (l *Ledger) HeldBy(tenant string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldBy[tenant]
}

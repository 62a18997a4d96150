package capacity

import "math"

// Fair share between tenants on a full node (docs/capacity.md): one tenant's burst must not take
// every live slot while another tenant waits. A tenant's fair share is the node's live slots over
// the number of tenants holding a slot or waiting for one. When the node is full:
//   - the queue serves a claim of a tenant under its share (holding fewer slots than it) before
//     those of tenants at or over theirs, each group in arrival order;
//   - eviction hibernates an idle session of a tenant over its share before anyone else's
//     (EvictionOrder), so the slot a waiting tenant gets comes out of the largest holder's.

// fairShare is each tenant's share of max slots, given the slots each holds and the tenants of the
// queued claims; +Inf without a bound or without tenants.
func fairShare(max int, heldBy map[string]int, waiting []*waiter) float64 {
	if max <= 0 {
		return math.Inf(1)
	}
	tenants := make(map[string]bool, len(heldBy)+len(waiting))
	for t, n := range heldBy {
		if n > 0 {
			tenants[t] = true
		}
	}
	for _, w := range waiting {
		tenants[w.tenant] = true
	}
	if len(tenants) == 0 {
		return math.Inf(1)
	}
	return float64(max) / float64(len(tenants))
}

// nextLocked is the queued claim to serve next: the first, in arrival order, whose tenant holds
// less than its fair share; else the first in arrival order. nil when none queues.
func (l *Ledger) nextLocked() *waiter {
	if len(l.waiters) == 0 {
		return nil
	}
	share := fairShare(l.max, l.heldBy, l.waiters)
	for _, w := range l.waiters {
		if float64(l.heldBy[w.tenant]) < share {
			return w
		}
	}
	return l.waiters[0]
}

// OverShare lists the tenants holding more slots than their fair share: their idle sessions are
// hibernated first.
func (l *Ledger) OverShare() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	share := fairShare(l.max, l.heldBy, l.waiters)
	over := map[string]bool{}
	for t, n := range l.heldBy {
		if float64(n) > share {
			over[t] = true
		}
	}
	return over
}

package session

import (
	"context"
	"sort"
	"time"

	"github.com/carryover/carryover"
)

// Eviction frees a live-kernel slot or memory by hibernating an idle session: checkpointed first,
// through the same path as POST .../hibernate and the idle culler (hibernateLocked), so its next
// turn wakes it with everything it had. A session running a turn (its run lock held) is never a
// candidate; one whose checkpoint fails is skipped (its kernel is never stopped unsaved).

// Hibernation reasons: the session_hibernated event's reason and the evictions' label.
const (
	reasonCapacity  = "capacity"  // a claim found the node full (capacity.max_live_kernels)
	reasonMemory    = "memory"    // memory pressure (capacity.memory_budget_bytes, PSI, MemAvailable)
	reasonIdle      = "idle"      // cull.idle_seconds
	reasonRequested = "requested" // POST .../hibernate
)

// evictCandidate is a live session as eviction sees it.
type evictCandidate struct {
	ls           *liveSession
	tenant       string
	lastActivity time.Time
	busy         bool // its run lock is held: a turn is running (or queued for it)
	background   bool // it had background processes at the last sample: a hibernation ends them
}

// evictionOrder returns the idle candidates, best victim first: those of a tenant over its fair
// share (over) before the others, then those without background processes before those with,
// then least recently active first.
func evictionOrder(cands []evictCandidate, over map[string]bool) []*liveSession {
	idle := make([]evictCandidate, 0, len(cands))
	for _, c := range cands {
		if !c.busy {
			idle = append(idle, c)
		}
	}
	sort.SliceStable(idle, func(i, j int) bool {
		if oi, oj := over[idle[i].tenant], over[idle[j].tenant]; oi != oj {
			return oi
		}
		if idle[i].background != idle[j].background {
			return !idle[i].background
		}
		return idle[i].lastActivity.Before(idle[j].lastActivity)
	})
	out := make([]*liveSession, len(idle))
	for i, c := range idle {
		out[i] = c.ls
	}
	return out
}

// evictionCandidates lists the sessions holding a kernel now.
func (s *Service) evictionCandidates() []evictCandidate {
	live := s.liveSessions()
	out := make([]evictCandidate, 0, len(live))
	for _, ls := range live {
		ls.mu.Lock()
		c := evictCandidate{ls: ls, tenant: ls.doc.TenantName(), lastActivity: ls.doc.LastActivity, background: len(ls.bgSeen) > 0}
		ls.mu.Unlock()
		c.busy = ls.lock.Busy()
		out = append(out, c)
	}
	return out
}

// evictIdle hibernates the best idle victim for reason (evictionOrder: a tenant over its fair
// share of slots first), returning the memory its kernel held at its last sample and whether one
// was hibernated.
func (s *Service) evictIdle(ctx context.Context, reason string) (int64, bool) {
	ctx = context.WithoutCancel(ctx) // a checkpoint is never abandoned half-way
	for _, ls := range evictionOrder(s.evictionCandidates(), s.slots.overShare()) {
		if !ls.lock.TryLock() {
			continue // a turn started meanwhile
		}
		rss, ok := s.evictLocked(ctx, ls, reason)
		ls.lock.Unlock()
		if ok {
			return rss, true
		}
	}
	return 0, false
}

// evictLocked hibernates ls if it still holds a kernel and is running or paused. Caller holds ls.lock.
func (s *Service) evictLocked(ctx context.Context, ls *liveSession, reason string) (int64, bool) {
	if ls.currentKernel() == nil || !hibernatable(ls.docCopy().State) {
		return 0, false
	}
	ls.mu.Lock()
	rss := ls.cost.rss
	ls.mu.Unlock()
	if err := s.hibernateLocked(ctx, ls, reason); err != nil {
		s.log.Warn("eviction skipped: the session could not be saved", "session", ls.id, "reason", reason, "err", err)
		return 0, false
	}
	s.log.Info("session hibernated to make room", "session", ls.id, "reason", reason, "rss_bytes", rss)
	return rss, true
}

// hibernatable says whether the node may hibernate a session in state st to free room: a running
// one, or a paused one. A paused session keeps its kernel until then, and would otherwise hold a
// slot for as long as it stays paused. It stays paused (its turns answer session_paused); after
// Resume its next turn wakes it with everything it had.
func hibernatable(st string) bool {
	return st == carryover.StateRunning || st == carryover.StatePaused
}

// countHibernation counts a hibernation by reason (the status endpoint and its metric).
func (s *Service) countHibernation(reason string) {
	hibernations.WithLabelValues(reason).Inc()
	s.mu.Lock()
	if s.evictions == nil {
		s.evictions = map[string]int64{}
	}
	s.evictions[reason]++
	s.mu.Unlock()
}

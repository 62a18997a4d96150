package session

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/capacity"
)

// Eviction frees a live-kernel slot or memory by hibernating an idle session: checkpointed first,
// through the same path as POST .../hibernate and the idle culler (hibernateLocked), so its next
// turn wakes it with everything it had. A session running a turn (its run lock held) is never a
// candidate; one whose checkpoint fails is skipped (its kernel is never stopped unsaved).

// evictionCandidates lists the sessions holding a kernel now.
func evictionCandidates(live []*Session) []capacity.Candidate[*Session] {
	out := make([]capacity.Candidate[*Session], 0, len(live))
	for _, ls := range live {
		ls.mu.Lock()
		c := capacity.Candidate[*Session]{Item: ls, Tenant: ls.doc.TenantName(), LastActivity: ls.doc.LastActivity,
			Background: ls.notes.HasBackground()}
		ls.mu.Unlock()
		c.Busy = ls.lock.Busy()
		out = append(out, c)
	}
	return out
}

// evictIdle hibernates the best idle victim for reason (capacity.EvictionOrder: a tenant over its fair
// share of slots first), returning the memory its kernel cost at its last sample (Resident.Charged:
// a fork child's map of a shared copy frees nothing) and whether one was hibernated.
func (s *Service) evictIdle(ctx context.Context, reason string) (int64, bool) {
	// A checkpoint is never abandoned half-way, and the victim's writes are durable on their own:
	// the claim's turn that asked (carryover.DeferSync) is not the victim's.
	ctx = carryover.SyncEach(context.WithoutCancel(ctx))
	for _, ls := range capacity.EvictionOrder(evictionCandidates(s.liveSessions()), s.adm.ledger.OverShare()) {
		if !ls.lock.TryLock() {
			continue // a turn started meanwhile
		}
		rss, ok := ls.evictLocked(ctx, reason)
		ls.lock.Unlock()
		if ok {
			return rss, true
		}
	}
	return 0, false
}

// evictLocked hibernates ls if it still holds a kernel and is running or paused. Caller holds ls.lock.
func (ls *Session) evictLocked(ctx context.Context, reason string) (int64, bool) {
	s := ls.svc
	if ls.currentKernel() == nil || !hibernatable(ls.docCopy().State) {
		return 0, false
	}
	ls.mu.Lock()
	rss := ls.residentLocked().Charged(s.sharedHeld())
	ls.mu.Unlock()
	if err := ls.hibernateLocked(ctx, reason); err != nil {
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

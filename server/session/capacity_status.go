package session

import (
	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/metrics"
	"github.com/carryover/carryover/server/session/nodewatch"
)

// Status is this node's capacity, sessions, memory, pool, evictions and refusals.
func (s *Service) Status() nodewatch.NodeStatus {
	sl := s.adm.ledger.Stats()
	ps := s.kern.Pool().Stats()
	st := nodewatch.NodeStatus{
		NodeID: s.cfg.NodeID,
		Capacity: nodewatch.CapacityStatus{MaxLiveKernels: sl.Max, Source: s.watch.Budget.Source, LiveKernels: sl.Held,
			Queued: sl.Queued, QueuedTotal: sl.QueuedTotal, QueueSeconds: s.cfg.QueueWait.Seconds(),
			MemoryBudgetBytes: s.watch.Budget.Memory, KernelBytes: s.watch.Budget.KernelBytes},
		Pool: nodewatch.PoolStatus{Idle: ps.Idle, Starting: ps.Starting, Target: ps.Target, Size: ps.Size, MaxSize: ps.MaxSize,
			Claims: ps.Claims, Misses: ps.Misses, Grown: ps.Grown},
		Refusals: sl.Refused,
	}
	s.mu.Lock()
	all := make([]*Session, 0, len(s.sessions))
	for _, ls := range s.sessions {
		all = append(all, ls)
	}
	s.mu.Unlock()
	s.watch.Report(&st)
	st.Sessions = countSessions(all)
	if r, ok := s.kern.Provisioner().(kernel.TemplateReporter); ok {
		if ts, ok := r.TemplateStats(); ok {
			st.Templates = &ts
		}
	}
	return st
}

// countSessions counts live, hibernated and busy sessions.
func countSessions(all []*Session) nodewatch.SessionCounts {
	c := nodewatch.SessionCounts{Total: len(all)}
	for _, ls := range all {
		ls.mu.Lock()
		live, state := ls.kern != nil, ls.doc.State
		ls.mu.Unlock()
		switch {
		case live:
			c.Live++
		case state == carryover.StateRunning:
			c.Hibernated++
		}
		if ls.lock.Busy() {
			c.Busy++
		}
	}
	return c
}

// updateGauges sets the gauges the status endpoint also shows (the background loop, every tick).
func (s *Service) updateGauges() {
	s.mu.Lock()
	all := make([]*Session, 0, len(s.sessions))
	for _, ls := range s.sessions {
		all = append(all, ls)
	}
	s.mu.Unlock()
	s.m.SessionsHibernated.Set(float64(countSessions(all).Hibernated))
	s.m.Tenants.Set(tenantShares(all))
	ps := s.kern.Pool().Stats()
	s.m.PoolIdle.Set(float64(ps.Idle))
	s.m.PoolTarget.Set(float64(ps.Target))
}

// tenantShares is each session's share of its tenant's figures (package metrics sums and bounds them).
func tenantShares(all []*Session) []metrics.TenantSeries {
	out := make([]metrics.TenantSeries, 0, len(all))
	for _, ls := range all {
		ls.mu.Lock()
		sh := metrics.TenantSeries{Tenant: ls.doc.TenantName(), Sessions: 1, CPUSeconds: ls.doc.BudgetConsumed.CPUSeconds}
		switch {
		case ls.kern != nil:
			sh.Live = 1
		case ls.doc.State == carryover.StateRunning:
			sh.Hibernated = 1
		}
		ls.mu.Unlock()
		if ls.lock.Busy() {
			sh.Busy = 1
		}
		out = append(out, sh)
	}
	return out
}

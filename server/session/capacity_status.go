package session

import (
	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/metrics"
)

// NodeStatus is GET /api/status: what this node holds and can take (docs/api.md, docs/capacity.md).
type NodeStatus struct {
	NodeID    string           `json:"node_id,omitempty"`
	Capacity  CapacityStatus   `json:"capacity"`
	Sessions  SessionCounts    `json:"sessions"`
	Memory    MemoryStatus     `json:"memory"`
	Pool      PoolStatus       `json:"pool"`
	Evictions map[string]int64 `json:"evictions"` // hibernations since start, by reason
	Refusals  map[string]int64 `json:"refusals"`  // 429 capacity answers since start, by reason
}

// CapacityStatus is the node's live-kernel capacity.
type CapacityStatus struct {
	MaxLiveKernels    int     `json:"max_live_kernels"` // 0: no limit
	Source            string  `json:"source"`           // config | derived (from the memory budget)
	LiveKernels       int     `json:"live_kernels"`     // slots held: session kernels, ephemeral runs
	Queued            int     `json:"queued"`           // claims waiting for a slot now
	QueuedTotal       int64   `json:"queued_total"`     // claims that had to wait, since start
	QueueSeconds      float64 `json:"queue_seconds"`
	MemoryBudgetBytes int64   `json:"memory_budget_bytes"`
	KernelBytes       int64   `json:"kernel_bytes"`
}

// SessionCounts counts this node's sessions.
type SessionCounts struct {
	Total      int `json:"total"`
	Live       int `json:"live"`       // holding a kernel
	Hibernated int `json:"hibernated"` // running, without a kernel (it wakes on its next turn)
	Busy       int `json:"busy"`       // running a turn (or a turn queued on its run lock)
}

// MemoryStatus is the last memory reading of the pressure watch.
type MemoryStatus struct {
	KernelBytes    int64   `json:"kernel_bytes"`    // resident memory of the live kernels, last samples
	AvailableBytes int64   `json:"available_bytes"` // the host's (or cgroup's) room; -1: unknown
	PSIFullAvg10   float64 `json:"psi_full_avg10"`  // -1: no PSI on this host
}

// PoolStatus is the warm pool.
type PoolStatus struct {
	Idle     int   `json:"idle"`
	Starting int   `json:"starting"`
	Target   int   `json:"target"`
	Size     int   `json:"size"`
	MaxSize  int   `json:"max_size"`
	Claims   int64 `json:"claims"`
	Misses   int64 `json:"misses"` // claims that found no warm kernel
	Grown    int64 `json:"grown"`  // times the target grew under a burst
}

// memoryReading is the last tick's memory reading.
type memoryReading struct {
	kernels int64
	host    HostMemory
	read    bool
}

// noteMemory keeps the tick's reading for Status and the metrics.
func (w *nodeWatch) noteMemory(kernels int64, h HostMemory) {
	w.mu.Lock()
	w.last = memoryReading{kernels: kernels, host: h, read: true}
	w.mu.Unlock()
	w.kernelMemory.Set(float64(kernels))
}

// Status is this node's capacity, sessions, memory, pool, evictions and refusals.
func (s *Service) Status() NodeStatus {
	sl := s.adm.ledger.Stats()
	ps := s.kern.pool.Stats()
	st := NodeStatus{
		NodeID: s.cfg.NodeID,
		Capacity: CapacityStatus{MaxLiveKernels: sl.Max, Source: s.watch.budget.Source, LiveKernels: sl.Held,
			Queued: sl.Queued, QueuedTotal: sl.QueuedTotal, QueueSeconds: s.cfg.QueueWait.Seconds(),
			MemoryBudgetBytes: s.watch.budget.Memory, KernelBytes: s.watch.budget.KernelBytes},
		Pool: PoolStatus{Idle: ps.Idle, Starting: ps.Starting, Target: ps.Target, Size: ps.Size, MaxSize: ps.MaxSize,
			Claims: ps.Claims, Misses: ps.Misses, Grown: ps.Grown},
		Refusals:  sl.Refused,
		Evictions: map[string]int64{},
	}
	s.mu.Lock()
	all := make([]*Session, 0, len(s.sessions))
	for _, ls := range s.sessions {
		all = append(all, ls)
	}
	s.mu.Unlock()
	s.watch.mu.Lock()
	for k, v := range s.watch.evictions {
		st.Evictions[k] = v
	}
	mem := s.watch.last
	s.watch.mu.Unlock()
	st.Sessions = countSessions(all)
	if !mem.read {
		mem.host = HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}
	}
	st.Memory = MemoryStatus{KernelBytes: mem.kernels, AvailableBytes: mem.host.AvailableBytes, PSIFullAvg10: mem.host.PSIFullAvg10}
	return st
}

// countSessions counts live, hibernated and busy sessions.
func countSessions(all []*Session) SessionCounts {
	c := SessionCounts{Total: len(all)}
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
	ps := s.kern.pool.Stats()
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

package session

import (
	"context"
	"sync"
	"time"

	"github.com/carryover/carryover"
)

// Tenant quotas (Config.Quotas, docs/tenants.md): each refusal is 429 quota_exceeded naming the
// quota, its limit and its use.
//   - sessions: counted from every session of the store (ListAll), checked by Create. Creates of one
//     tenant pass the check one at a time, each until its session is in the store, so concurrent
//     creates cannot all slip under the limit.
//   - live_kernels: counted on this node (the sessions holding a kernel, those claiming one, and
//     ephemeral runs), checked before a kernel is claimed for a session or an ephemeral run. A claim
//     reserves its slot, so concurrent claims cannot all pass.
//   - stored_bytes and cpu_seconds: counted from the store's checkpoints and sessions, checked when
//     a turn is admitted; a turn in flight may finish past them (the next one is refused).

// quotaGate is the service's quota bookkeeping; its zero value is ready.
type quotaGate struct {
	createMu sync.Map // tenant -> *sync.Mutex: a tenant's creates pass the sessions check in turn

	mu       sync.Mutex
	claiming map[string]string      // slot (session id, ephemeral run id) -> tenant: a reserved live kernel
	stored   map[string]storedCount // session id -> its checkpoints' bytes
	windows  map[string]*cpuWindow  // tenant -> CPU counted in the current period
}

type tenantUsage struct {
	stored int64
	cpu    float64
}

// storedCount is a session's checkpoint bytes as counted at its last checkpoint last.
type storedCount struct {
	tenant string
	last   string
	bytes  int64
}

// cpuWindow is a tenant's CPU period: each session's CPU seconds when the period began (or when
// this node first saw it; 0 for sessions created in the period).
type cpuWindow struct {
	start time.Time
	base  map[string]float64
}

func (s *Service) quotasOf(tenant string) carryover.Quotas {
	if s.cfg.Quotas == nil {
		return carryover.Quotas{}
	}
	return s.cfg.Quotas(tenant)
}

// admitCreate checks the sessions quota of tenant for one more session. The caller calls release
// once its session is in the store (or failed to get there).
func (s *Service) admitCreate(ctx context.Context, tenant string) (release func(), err error) {
	q := s.quotasOf(tenant)
	if q.Sessions <= 0 {
		return func() {}, nil
	}
	m, _ := s.quota.createMu.LoadOrStore(tenant, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	all, err := s.ListAll(ctx)
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	n := 0
	for _, d := range all {
		if d.TenantName() == tenant {
			n++
		}
	}
	if n >= q.Sessions {
		mu.Unlock()
		return nil, carryover.QuotaError(tenant, carryover.QuotaSessions, q.Sessions, n)
	}
	return mu.Unlock, nil
}

// admitKernel checks the live_kernels quota of ls's tenant before a kernel is claimed for it and
// reserves the slot; the caller calls release once the kernel is attached (or the claim failed).
func (s *Service) admitKernel(ls *liveSession) (release func(), err error) {
	return s.reserveKernel(ls.tenant(), ls.id)
}

// admitEphemeral admits a throwaway run (POST /api/execute) of tenant: refused when the tenant is
// at its stored_bytes or cpu_seconds quota, and holding one of its live_kernels while it runs. Its
// own CPU is not counted (no session records it).
func (s *Service) admitEphemeral(ctx context.Context, tenant, id string) (release func(), err error) {
	if err := s.checkTenantQuotas(ctx, tenant); err != nil {
		return nil, err
	}
	return s.reserveKernel(tenant, id)
}

// reserveKernel reserves a live kernel of tenant for slot (a session id, or an ephemeral run's)
// unless the tenant is at its live_kernels quota. The kernels counted: the tenant's sessions on this
// node holding one, and the slots reserved (each once).
func (s *Service) reserveKernel(tenant, slot string) (release func(), err error) {
	q := s.quotasOf(tenant)
	if q.LiveKernels <= 0 {
		return func() {}, nil
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	n := 0
	for _, t := range s.quota.claiming {
		if t == tenant {
			n++
		}
	}
	for _, o := range s.localSessions() {
		if _, reserved := s.quota.claiming[o.id]; !reserved && o.tenant() == tenant && o.currentKernel() != nil {
			n++
		}
	}
	if n >= q.LiveKernels {
		return nil, carryover.QuotaError(tenant, carryover.QuotaLiveKernels, q.LiveKernels, n)
	}
	if s.quota.claiming == nil {
		s.quota.claiming = map[string]string{}
	}
	s.quota.claiming[slot] = tenant
	return func() {
		s.quota.mu.Lock()
		delete(s.quota.claiming, slot)
		s.quota.mu.Unlock()
	}, nil
}

// checkTurnQuotas refuses a turn of ls when its tenant is at its stored_bytes or cpu_seconds quota.
func (s *Service) checkTurnQuotas(ctx context.Context, ls *liveSession) error {
	return s.checkTenantQuotas(ctx, ls.tenant())
}

// checkTenantQuotas refuses a turn of tenant at its stored_bytes or cpu_seconds quota.
func (s *Service) checkTenantQuotas(ctx context.Context, tenant string) error {
	q := s.quotasOf(tenant)
	if q.StoredBytes <= 0 && q.CPUSeconds <= 0 {
		return nil
	}
	u, err := s.tenantUsage(ctx, tenant, q)
	if err != nil {
		return err
	}
	if q.StoredBytes > 0 && u.stored >= q.StoredBytes {
		return carryover.QuotaError(tenant, carryover.QuotaStoredBytes, q.StoredBytes, u.stored)
	}
	if q.CPUSeconds > 0 && u.cpu >= q.CPUSeconds {
		return carryover.QuotaError(tenant, carryover.QuotaCPUSeconds, q.CPUSeconds, u.cpu).
			WithDetails("period_seconds", q.CPUPeriod.Seconds())
	}
	return nil
}

// tenantUsage counts tenant's stored bytes and CPU seconds this period, from its sessions as
// ListAll has them. A session's checkpoint bytes are listed from the store only when its last
// checkpoint changed since they were last counted (a turn's checkpoint, a restore, a prune), so a
// turn costs one listing of the sessions, not of every checkpoint.
func (s *Service) tenantUsage(ctx context.Context, tenant string, q carryover.Quotas) (tenantUsage, error) {
	all, err := s.ListAll(ctx)
	if err != nil {
		return tenantUsage{}, err
	}
	var u tenantUsage
	cpu := map[string]float64{}
	created := map[string]time.Time{}
	for _, d := range all {
		if d.TenantName() != tenant {
			continue
		}
		cpu[d.ID] = d.BudgetConsumed.CPUSeconds
		created[d.ID] = d.CreatedAt
		if q.StoredBytes > 0 {
			n, err := s.storedBytes(ctx, d)
			if err != nil {
				return tenantUsage{}, err
			}
			u.stored += n
		}
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	for id, c := range s.quota.stored {
		if _, ok := cpu[id]; !ok && c.tenant == tenant {
			delete(s.quota.stored, id) // deleted since
		}
	}
	u.cpu = s.quota.cpuUsedLocked(tenant, q.CPUPeriod, time.Now(), cpu, created)
	return u, nil
}

// storedBytes is the bytes the kept checkpoints of session d wrote, counted again only when d's
// last checkpoint is not the one they were counted at.
func (s *Service) storedBytes(ctx context.Context, d carryover.Session) (int64, error) {
	last := ""
	if d.LastCheckpoint != nil {
		last = d.LastCheckpoint.ID
	}
	if last == "" {
		return 0, nil
	}
	s.quota.mu.Lock()
	c, ok := s.quota.stored[d.ID]
	s.quota.mu.Unlock()
	if ok && c.last == last {
		return c.bytes, nil
	}
	cps, err := s.store.ListCheckpoints(ctx, d.ID)
	if err != nil {
		return 0, err
	}
	n := sumCheckpointBytes(cps)
	s.quota.mu.Lock()
	if s.quota.stored == nil {
		s.quota.stored = map[string]storedCount{}
	}
	s.quota.stored[d.ID] = storedCount{tenant: d.TenantName(), last: last, bytes: n}
	s.quota.mu.Unlock()
	return n, nil
}

// cpuUsedLocked is the CPU seconds tenant's sessions used since the start of the current period
// (fixed windows of period from the Unix epoch). cpu and created are each session's CPU seconds so
// far and creation time.
func (g *quotaGate) cpuUsedLocked(tenant string, period time.Duration, now time.Time, cpu map[string]float64, created map[string]time.Time) float64 {
	if period <= 0 {
		period = 24 * time.Hour
	}
	start := now.Truncate(period)
	if g.windows == nil {
		g.windows = map[string]*cpuWindow{}
	}
	w := g.windows[tenant]
	if w == nil || !w.start.Equal(start) {
		w = &cpuWindow{start: start, base: map[string]float64{}}
		g.windows[tenant] = w
	}
	used := 0.0
	for id, c := range cpu {
		base, seen := w.base[id]
		if !seen {
			if !created[id].Before(start) {
				base = 0 // made in this period: all its CPU is this period's
			} else {
				base = c
			}
			w.base[id] = base
		}
		if c > base {
			used += c - base
		}
	}
	return used
}

// localSessions is the sessions this node holds.
func (s *Service) localSessions() []*liveSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*liveSession, 0, len(s.sessions))
	for _, ls := range s.sessions {
		out = append(out, ls)
	}
	return out
}

// tenant is the session's tenant.
func (ls *liveSession) tenant() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.doc.TenantName()
}

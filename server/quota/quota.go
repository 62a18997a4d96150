// Package quota is the tenants' quotas other than live kernels (docs/tenants.md): sessions, stored
// bytes and CPU seconds, each refusal a 429 quota_exceeded naming the quota, its limit and its use.
//   - sessions: counted from every session (Usage.Sessions), checked by AdmitCreate. Creates of one
//     tenant pass the check one at a time, each until its session is stored, so concurrent creates
//     cannot all slip under the limit.
//   - stored_bytes and cpu_seconds: counted from the sessions and their checkpoints, checked when a
//     turn is admitted (CheckTurn); a turn in flight may finish past them (the next one is refused).
//
// The live_kernels quota is the node's ledger's (server/capacity: a claim of a kernel is refused
// there before it takes a slot). This package imports the domain package and the standard library
// only.
package quota

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/carryover/carryover"
)

// Usage is what the gate counts from: the sessions (of every node, in a cluster) and the bytes a
// session's kept checkpoints wrote.
type Usage interface {
	Sessions(ctx context.Context) ([]carryover.Session, error)
	CheckpointBytes(ctx context.Context, sessionID string) (int64, error)
}

// Gate checks the tenants' quotas; New makes one.
type Gate struct {
	limits func(tenant string) carryover.Quotas // nil: no quotas
	usage  Usage

	createMu sync.Map // tenant -> *sync.Mutex: a tenant's creates pass the sessions check in turn

	mu      sync.Mutex
	stored  map[string]storedCount // session id -> its checkpoints' bytes
	windows map[string]*cpuWindow  // tenant -> CPU counted in the current period
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

// New returns a gate of the quotas limits gives each tenant (nil: none), counting from u.
func New(limits func(tenant string) carryover.Quotas, u Usage) *Gate {
	return &Gate{limits: limits, usage: u, stored: map[string]storedCount{}, windows: map[string]*cpuWindow{}}
}

// Of is tenant's quotas.
func (g *Gate) Of(tenant string) carryover.Quotas {
	if g.limits == nil {
		return carryover.Quotas{}
	}
	return g.limits(tenant)
}

// AdmitCreate checks the sessions quota of tenant for one more session. The caller calls release
// once its session is stored (or failed to be).
func (g *Gate) AdmitCreate(ctx context.Context, tenant string) (release func(), err error) {
	return g.admitCreate(ctx, tenant, 1)
}

// admitCreate admits n more sessions of tenant, all or none, holding the tenant's create lock
// until release (AdmitCreate, AdmitCreateN).
func (g *Gate) admitCreate(ctx context.Context, tenant string, n int) (release func(), err error) {
	q := g.Of(tenant)
	if q.Sessions <= 0 {
		return func() {}, nil
	}
	m, _ := g.createMu.LoadOrStore(tenant, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	all, err := g.usage.Sessions(ctx)
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	use := 0
	for _, d := range all {
		if d.TenantName() == tenant {
			use++
		}
	}
	if use+n <= q.Sessions {
		return mu.Unlock, nil
	}
	mu.Unlock()
	e := carryover.QuotaError(tenant, carryover.QuotaSessions, q.Sessions, use)
	if n > 1 {
		e.Message = fmt.Sprintf("%s; %d new sessions asked, room for %d: none was created", e.Message, n, max(q.Sessions-use, 0))
		e = e.WithDetails("requested", n)
	}
	return nil, e
}

// CheckTurn refuses a turn of tenant at its stored_bytes or cpu_seconds quota.
func (g *Gate) CheckTurn(ctx context.Context, tenant string) error {
	q := g.Of(tenant)
	if q.StoredBytes <= 0 && q.CPUSeconds <= 0 {
		return nil
	}
	stored, cpu, err := g.usageOf(ctx, tenant, q)
	if err != nil {
		return err
	}
	if q.StoredBytes > 0 && stored >= q.StoredBytes {
		return carryover.QuotaError(tenant, carryover.QuotaStoredBytes, q.StoredBytes, stored)
	}
	if q.CPUSeconds > 0 && cpu >= q.CPUSeconds {
		return carryover.QuotaError(tenant, carryover.QuotaCPUSeconds, q.CPUSeconds, cpu).
			WithDetails("period_seconds", q.CPUPeriod.Seconds())
	}
	return nil
}

// CheckStore refuses to store extra more bytes for tenant (an imported archive's new chunks) when
// they would take it past its stored_bytes quota.
func (g *Gate) CheckStore(ctx context.Context, tenant string, extra int64) error {
	q := g.Of(tenant)
	if q.StoredBytes <= 0 {
		return nil
	}
	stored, _, err := g.usageOf(ctx, tenant, carryover.Quotas{StoredBytes: q.StoredBytes})
	if err != nil {
		return err
	}
	if stored+extra > q.StoredBytes {
		return carryover.QuotaError(tenant, carryover.QuotaStoredBytes, q.StoredBytes, stored+extra)
	}
	return nil
}

// usageOf counts tenant's stored bytes and CPU seconds this period, from its sessions. A session's
// checkpoint bytes are counted again only when its last checkpoint changed since they were last
// counted (a turn's checkpoint, a restore, a prune), so a turn costs one listing of the sessions,
// not of every checkpoint.
func (g *Gate) usageOf(ctx context.Context, tenant string, q carryover.Quotas) (stored int64, cpuUsed float64, err error) {
	all, err := g.usage.Sessions(ctx)
	if err != nil {
		return 0, 0, err
	}
	cpu := map[string]float64{}
	created := map[string]time.Time{}
	for _, d := range all {
		if d.TenantName() != tenant {
			continue
		}
		cpu[d.ID] = d.BudgetConsumed.CPUSeconds
		created[d.ID] = d.CreatedAt
		if q.StoredBytes > 0 {
			n, err := g.storedBytes(ctx, d)
			if err != nil {
				return 0, 0, err
			}
			stored += n
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, c := range g.stored {
		if _, ok := cpu[id]; !ok && c.tenant == tenant {
			delete(g.stored, id) // deleted since
		}
	}
	return stored, g.cpuUsedLocked(tenant, q.CPUPeriod, time.Now(), cpu, created), nil
}

// storedBytes is the bytes the kept checkpoints of session d wrote, counted again only when d's
// last checkpoint is not the one they were counted at.
func (g *Gate) storedBytes(ctx context.Context, d carryover.Session) (int64, error) {
	if d.LastCheckpoint == nil || d.LastCheckpoint.ID == "" {
		return 0, nil
	}
	last := d.LastCheckpoint.ID
	g.mu.Lock()
	c, ok := g.stored[d.ID]
	g.mu.Unlock()
	if ok && c.last == last {
		return c.bytes, nil
	}
	n, err := g.usage.CheckpointBytes(ctx, d.ID)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.stored[d.ID] = storedCount{tenant: d.TenantName(), last: last, bytes: n}
	g.mu.Unlock()
	return n, nil
}

// cpuUsedLocked is the CPU seconds tenant's sessions used since the start of the current period
// (fixed windows of period from the Unix epoch). cpu and created are each session's CPU seconds so
// far and creation time.
func (g *Gate) cpuUsedLocked(tenant string, period time.Duration, now time.Time, cpu map[string]float64, created map[string]time.Time) float64 {
	if period <= 0 {
		period = 24 * time.Hour
	}
	start := now.Truncate(period)
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

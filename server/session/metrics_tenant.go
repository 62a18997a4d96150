package session

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carryover/carryover"
)

// Per-tenant metrics with a bounded label set: a node with thousands of tenants must not give
// Prometheus thousands of series per metric. The maxTenantSeries tenants using the most (live
// kernels, then sessions, then CPU) get a series each; the rest are summed under "_other".
const (
	maxTenantSeries = 20
	otherTenants    = "_other"
)

// tenantSeries is one tenant's sessions on this node at the last tick.
type tenantSeries struct {
	tenant           string
	sessions, live   int
	hibernated, busy int
	cpuSeconds       float64
}

// tenantCollector serves the last tick's figures at each scrape (computed by updateGauges, not
// at scrape time: a scrape must not walk every session under its locks).
type tenantCollector struct {
	last                                  atomic.Pointer[[]tenantSeries]
	sessions, live, hibernated, busy, cpu *prometheus.Desc
}

func newTenantCollector() *tenantCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help+" Per tenant: the 20 largest, the rest summed as _other.", []string{"tenant"}, nil)
	}
	return &tenantCollector{
		sessions:   d("carryover_tenant_sessions", "Sessions on this node."),
		live:       d("carryover_tenant_live_kernels", "Live kernels on this node."),
		hibernated: d("carryover_tenant_sessions_hibernated", "Running sessions without a live kernel."),
		busy:       d("carryover_tenant_sessions_busy", "Sessions running a turn."),
		cpu:        d("carryover_tenant_cpu_seconds", "CPU seconds used by the sessions on this node (budget_consumed.cpu_seconds, summed)."),
	}
}

func (c *tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sessions, c.live, c.hibernated, c.busy, c.cpu} {
		ch <- d
	}
}

func (c *tenantCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.last.Load()
	if p == nil {
		return
	}
	for _, u := range *p {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, u.tenant)
		}
		g(c.sessions, float64(u.sessions))
		g(c.live, float64(u.live))
		g(c.hibernated, float64(u.hibernated))
		g(c.busy, float64(u.busy))
		g(c.cpu, u.cpuSeconds)
	}
}

// tenantSeriesOf sums the sessions by tenant, the largest maxTenantSeries first, the rest under
// otherTenants.
func tenantSeriesOf(all []*Session) []tenantSeries {
	by := map[string]*tenantSeries{}
	for _, ls := range all {
		ls.mu.Lock()
		t, live, state, cpu := ls.doc.TenantName(), ls.kern != nil, ls.doc.State, ls.doc.BudgetConsumed.CPUSeconds
		ls.mu.Unlock()
		u := by[t]
		if u == nil {
			u = &tenantSeries{tenant: t}
			by[t] = u
		}
		u.sessions++
		u.cpuSeconds += cpu
		switch {
		case live:
			u.live++
		case state == carryover.StateRunning:
			u.hibernated++
		}
		if ls.lock.Busy() {
			u.busy++
		}
	}
	out := make([]tenantSeries, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b tenantSeries) int {
		return cmp.Or(cmp.Compare(b.live, a.live), cmp.Compare(b.sessions, a.sessions), cmp.Compare(b.cpuSeconds, a.cpuSeconds),
			cmp.Compare(a.tenant, b.tenant))
	})
	if len(out) <= maxTenantSeries {
		return out
	}
	rest := tenantSeries{tenant: otherTenants}
	for _, u := range out[maxTenantSeries:] {
		rest.sessions += u.sessions
		rest.live += u.live
		rest.hibernated += u.hibernated
		rest.busy += u.busy
		rest.cpuSeconds += u.cpuSeconds
	}
	return append(out[:maxTenantSeries], rest)
}

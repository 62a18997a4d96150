package metrics

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-tenant metrics with a bounded label set: a node with thousands of tenants must not give
// Prometheus thousands of series per metric. The maxTenantSeries tenants using the most (live
// kernels, then sessions, then CPU) get a series each; the rest are summed under "_other".
const (
	maxTenantSeries = 20
	otherTenants    = "_other"
)

// TenantSeries is one tenant's sessions on this node at the last tick (or one session's share).
type TenantSeries struct {
	Tenant           string
	Sessions, Live   int
	Hibernated, Busy int
	CPUSeconds       float64
}

// TenantCollector serves the last tick's figures at each scrape (Set by the service's loop, not
// computed at scrape time: a scrape must not walk every session under its locks).
type TenantCollector struct {
	last                                  atomic.Pointer[[]TenantSeries]
	sessions, live, hibernated, busy, cpu *prometheus.Desc
}

// NewTenantCollector describes the per-tenant gauges.
func NewTenantCollector() *TenantCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help+" Per tenant: the 20 largest, the rest summed as _other.", []string{"tenant"}, nil)
	}
	return &TenantCollector{
		sessions:   d("carryover_tenant_sessions", "Sessions on this node."),
		live:       d("carryover_tenant_live_kernels", "Live kernels on this node."),
		hibernated: d("carryover_tenant_sessions_hibernated", "Running sessions without a live kernel."),
		busy:       d("carryover_tenant_sessions_busy", "Sessions running a turn."),
		cpu:        d("carryover_tenant_cpu_seconds", "CPU seconds used by the sessions on this node (budget_consumed.cpu_seconds, summed)."),
	}
}

// Describe is prometheus.Collector's.
func (c *TenantCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sessions, c.live, c.hibernated, c.busy, c.cpu} {
		ch <- d
	}
}

// Collect is prometheus.Collector's: the last Set's series.
func (c *TenantCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.last.Load()
	if p == nil {
		return
	}
	for _, u := range *p {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, u.Tenant)
		}
		g(c.sessions, float64(u.Sessions))
		g(c.live, float64(u.Live))
		g(c.hibernated, float64(u.Hibernated))
		g(c.busy, float64(u.Busy))
		g(c.cpu, u.CPUSeconds)
	}
}

// Set sums shares (one a session, or more a tenant) by tenant, keeps the largest maxTenantSeries
// (live kernels, then sessions, then CPU) and sums the rest under otherTenants, for the next
// scrapes.
func (c *TenantCollector) Set(shares []TenantSeries) {
	series := bound(shares)
	c.last.Store(&series)
}

// bound is Set's sum by tenant, largest first, the rest under otherTenants.
func bound(shares []TenantSeries) []TenantSeries {
	by := map[string]*TenantSeries{}
	for _, sh := range shares {
		u := by[sh.Tenant]
		if u == nil {
			u = &TenantSeries{Tenant: sh.Tenant}
			by[sh.Tenant] = u
		}
		u.add(sh)
	}
	out := make([]TenantSeries, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b TenantSeries) int {
		return cmp.Or(cmp.Compare(b.Live, a.Live), cmp.Compare(b.Sessions, a.Sessions), cmp.Compare(b.CPUSeconds, a.CPUSeconds),
			cmp.Compare(a.Tenant, b.Tenant))
	})
	if len(out) <= maxTenantSeries {
		return out
	}
	rest := TenantSeries{Tenant: otherTenants}
	for _, u := range out[maxTenantSeries:] {
		rest.add(u)
	}
	return append(out[:maxTenantSeries], rest)
}

// add adds o's figures to u's.
func (u *TenantSeries) add(o TenantSeries) {
	u.Sessions += o.Sessions
	u.Live += o.Live
	u.Hibernated += o.Hibernated
	u.Busy += o.Busy
	u.CPUSeconds += o.CPUSeconds
}

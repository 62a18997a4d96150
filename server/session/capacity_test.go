package session

import (
	"slices"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/metrics"
)

// TestStatusOfAnEmptyNode: the status endpoint's figures, and the load a cluster node publishes, on a
// node with one pending session.
func TestStatusOfAnEmptyNode(t *testing.T) {
	t.Parallel()
	s, _, _ := testService(t, func(c *Config) { c.MaxLiveKernels = 3; c.QueueWait = 2 * time.Second })
	mustCreate(t, s, CreateRequest{})
	st := s.Status()
	if st.Capacity.MaxLiveKernels != 3 || st.Capacity.LiveKernels != 0 || st.Capacity.QueueSeconds != 2 || st.Sessions.Total != 1 || st.Sessions.Live != 0 {
		t.Errorf("status = %+v", st)
	}
	if l := s.Load(); l != (carryover.NodeLoad{Capacity: 3}) {
		t.Errorf("load = %+v: a pending session holds no kernel", l)
	}
}

// TestTenantShares: each session is one session of its tenant, live when it holds a kernel,
// hibernated when it runs without one (package metrics sums and bounds the shares).
func TestTenantShares(t *testing.T) {
	running := &Session{doc: carryover.Session{Tenant: "a", State: carryover.StateRunning, BudgetConsumed: carryover.BudgetConsumed{CPUSeconds: 2}}}
	live := &Session{doc: carryover.Session{Tenant: "a", State: carryover.StateRunning}, kern: &kernel.Kernel{}}
	pending := &Session{doc: carryover.Session{Tenant: "b", State: carryover.StatePending}}
	got := tenantShares([]*Session{running, live, pending})
	want := []metrics.TenantSeries{
		{Tenant: "a", Sessions: 1, Hibernated: 1, CPUSeconds: 2},
		{Tenant: "a", Sessions: 1, Live: 1},
		{Tenant: "b", Sessions: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("shares = %+v, want %+v", got, want)
	}
}

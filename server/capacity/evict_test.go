package capacity

import (
	"testing"
	"time"
)

// TestEvictionOrder: busy sessions never; without background processes first; then least
// recently active first.
func TestEvictionOrder(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ids := EvictionOrder([]Candidate[string]{
		{Item: "a", LastActivity: now.Add(-time.Minute)},
		{Item: "b", LastActivity: now.Add(-time.Hour), Busy: true},
		{Item: "c", LastActivity: now.Add(-2 * time.Minute)},
		{Item: "d", LastActivity: now.Add(-3 * time.Hour), Background: true},
	}, nil)
	if len(ids) != 3 || ids[0] != "c" || ids[1] != "a" || ids[2] != "d" {
		t.Errorf("order = %v, want [c a d]", ids)
	}
}

// TestMemoryExcess: over the budget, under the reserve, PSI over its threshold.
func TestMemoryExcess(t *testing.T) {
	t.Parallel()
	noHost := HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}
	for _, tc := range []struct {
		name              string
		used, budget, rsv int64
		h                 HostMemory
		psi               float64
		want              int64
	}{
		{"under budget", 100, 200, 0, noHost, 10, 0},
		{"over budget", 300, 200, 0, noHost, 10, 100},
		{"no budget", 300, 0, 0, noHost, 10, 0},
		{"host short of its reserve", 100, 200, 1000, HostMemory{AvailableBytes: 400, PSIFullAvg10: -1}, 10, 600},
		{"psi over threshold", 100, 200, 0, HostMemory{AvailableBytes: -1, PSIFullAvg10: 12}, 10, 50},
		{"psi off", 100, 200, 0, HostMemory{AvailableBytes: -1, PSIFullAvg10: 90}, 0, 0},
	} {
		if got := MemoryExcess(tc.used, tc.budget, tc.h, tc.rsv, tc.psi, 50); got != tc.want {
			t.Errorf("%s: excess = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := psiFullAvg10([]byte("some avg10=1.50 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=2\n")); got != 0.75 {
		t.Errorf("psiFullAvg10 = %v", got)
	}
}

// TestResolveBudget: configured values stand; zeros are derived from the host's room.
func TestResolveBudget(t *testing.T) {
	t.Parallel()
	gib := int64(1 << 30)
	b := ResolveBudget(BudgetConfig{MemoryReserve: gib, KernelBytes: 100 << 20, PoolMaxSize: 4}, 11*gib)
	if b.Memory != 10*gib || b.MaxLive != 102-4 || b.Source != "derived" {
		t.Errorf("derived = %+v", b)
	}
	b = ResolveBudget(BudgetConfig{MaxLiveKernels: 4, MemoryBudget: gib}, 11*gib)
	if b.MaxLive != 4 || b.Memory != gib || b.KernelBytes != DefaultKernelBytes || b.Source != "config" {
		t.Errorf("configured = %+v", b)
	}
	if b = ResolveBudget(BudgetConfig{MaxLiveKernels: -1}, 11*gib); b.MaxLive != 0 {
		t.Errorf("no limit = %+v", b)
	}
	if b = ResolveBudget(BudgetConfig{MemoryReserve: 2 * gib}, gib); b.MaxLive != 1 {
		t.Errorf("a host with no room still holds one kernel: %+v", b)
	}
}

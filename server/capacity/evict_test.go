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
	// Kernels forked from templates: the smaller estimate, unless one is configured.
	b = ResolveBudget(BudgetConfig{MemoryReserve: gib, Forked: true, PoolMaxSize: 8}, 23*gib)
	if b.KernelBytes != DefaultForkedKernelBytes || b.MaxLive != int(22*gib/DefaultForkedKernelBytes)-8 {
		t.Errorf("forked, derived = %+v", b)
	}
	if b = ResolveBudget(BudgetConfig{Forked: true, KernelBytes: 100 << 20}, 11*gib); b.KernelBytes != 100<<20 {
		t.Errorf("forked, kernel_bytes configured = %+v", b)
	}
	// An open-file limit of 4,096 holds fewer kernels than 22 GiB of memory: the smaller bound.
	b = ResolveBudget(BudgetConfig{MemoryReserve: gib, Forked: true, PoolMaxSize: 8, OpenFiles: 4096}, 23*gib)
	if b.MaxLive != (4096-filesReserve)/FilesPerKernel-8 || b.Source != "derived" {
		t.Errorf("forked, 4,096 open files = %+v", b)
	}
	if b = ResolveBudget(BudgetConfig{MemoryReserve: gib, PoolMaxSize: 8, OpenFiles: 1 << 20}, 23*gib); b.MaxLive != int(22*gib/DefaultKernelBytes)-8 {
		t.Errorf("a high open-file limit changes nothing: %+v", b)
	}
	if b = ResolveBudget(BudgetConfig{MaxLiveKernels: 500, OpenFiles: 4096}, 23*gib); b.MaxLive != 500 {
		t.Errorf("a configured max_live_kernels stands: %+v", b)
	}
	if b = ResolveBudget(BudgetConfig{MaxLiveKernels: -1}, 11*gib); b.MaxLive != 0 {
		t.Errorf("no limit = %+v", b)
	}
	if b = ResolveBudget(BudgetConfig{MemoryReserve: 2 * gib}, gib); b.MaxLive != 1 {
		t.Errorf("a host with no room still holds one kernel: %+v", b)
	}
}

// TestKernelMemoryCountsSharedCopiesOnce: 100 fork children each mapping the node's one 1 GiB copy
// (RssShmem) cost the copy once plus what each holds privately; a child's own growth (writes into
// the copy become anonymous pages) is counted; shared memory a kernel makes itself is counted in full
// while the node holds no copy, and at most the copies' bytes of it are ever left out.
func TestKernelMemoryCountsSharedCopiesOnce(t *testing.T) {
	t.Parallel()
	const mib, gib = int64(1 << 20), int64(1 << 30)
	kids := make([]Resident, 100)
	for i := range kids {
		kids[i] = Resident{RSS: gib + 60*mib, Shmem: gib}
	}
	if got, want := KernelMemory(kids, gib), gib+100*60*mib; got != want {
		t.Fatalf("fan-out of 100 = %d MiB, want %d MiB (the copy once)", got/mib, want/mib)
	}
	// A 24 GiB node's budget: the old sum (RSS) was 106 GiB, over it, and hibernated ~80 children.
	if MemoryExcess(KernelMemory(kids, gib), 20*gib, HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}, 0, 0, 0) != 0 {
		t.Error("the fan-out is over a 20 GiB budget")
	}
	grown := append([]Resident{}, kids...)
	grown[0] = Resident{RSS: gib + 60*mib + 512*mib, Shmem: gib - 512*mib} // wrote half the copy
	if got, want := KernelMemory(grown, gib), gib+100*60*mib+1024*mib; got != want {
		t.Errorf("a child's writes: %d MiB, want %d MiB", got/mib, want/mib)
	}
	own := Resident{RSS: 3 * gib, Shmem: 3 * gib} // mmap(MAP_SHARED|MAP_ANONYMOUS) of its own
	if got := own.Charged(0); got != 3*gib {
		t.Errorf("a kernel's own shared memory with no copy held: %d MiB, want all of it", got/mib)
	}
	if got := own.Charged(gib); got != 2*gib {
		t.Errorf("with a 1 GiB copy held: %d MiB, want all but 1 GiB", got/mib)
	}
	if got := KernelMemory([]Resident{{RSS: 200 * mib}}, 0); got != 200*mib {
		t.Errorf("no copies: %d MiB, want the RSS", got/mib)
	}
}

// TestKernelMemoryCountsForkedKernelsOwnPages: a kernel whose own cost is known (forked from a
// template into a box: its box's memory charge) is counted that, not its RSS, which holds the
// template's pages it maps; the others are counted as before, beside it.
func TestKernelMemoryCountsForkedKernelsOwnPages(t *testing.T) {
	t.Parallel()
	const mib, gib = int64(1 << 20), int64(1 << 30)
	forked := make([]Resident, 200)
	for i := range forked {
		forked[i] = Resident{RSS: 130 * mib, Own: 25 * mib}
	}
	if got, want := KernelMemory(forked, 0), 200*25*mib; got != want {
		t.Fatalf("200 forked kernels = %d MiB, want %d MiB (their own pages)", got/mib, want/mib)
	}
	if MemoryExcess(KernelMemory(forked, 0), 20*gib, HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}, 0, 0, 0) != 0 {
		t.Error("200 forked kernels holding 5 GiB of their own are over a 20 GiB budget (their RSS: 25 GiB)")
	}
	cold := Resident{RSS: 150 * mib}
	if got, want := KernelMemory(append(forked[:2:2], cold), 0), 2*25*mib+150*mib; got != want {
		t.Errorf("two forked and a cold kernel = %d MiB, want %d MiB", got/mib, want/mib)
	}
}

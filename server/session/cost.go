package session

import (
	"context"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// The cost model behind budget.cost_cap_cents (documented in configs/carryover.yaml):
//
//	cost_cents = cpu_seconds × cost.cpu_second_cents + memory_gib_hours × cost.gib_hour_cents
//
// cpu_seconds is user+system CPU time of the session's kernels (process and reaped children, read
// from /proc by kernel.Stats) and of its exec commands (from the OS's rusage); memory_gib_hours
// integrates the kernel's resident memory over wall time between samples (every loop tick and at
// the end of each turn). Idle kernels cost memory but no CPU; hibernated sessions cost nothing.

// costMeter remembers the last sample of the current kernel.
type costMeter struct {
	lastCPU float64
	lastAt  time.Time
	rss     int64 // resident memory at the last sample (the memory pressure watch adds them up)
	// base, until a sample has used it, gives the CPU the kernel had used when the session claimed
	// it (costBaseline): the sample's starting point instead of lastCPU.
	base func() float64
}

// costBaseline is the meter a just-claimed kernel starts with. The CPU the kernel used before the
// session had it (its start and the pool's warm-up imports) is not the session's to pay: the first
// sample used to charge it all. It is read from /proc (a few ms) in the background, off the first
// turn; the meter's time is the claim, so a short first turn takes no sample of its own.
func costBaseline(k *kernel.Kernel) costMeter {
	ch := make(chan float64, 1)
	go func() {
		cpu := 0.0
		if st, err := k.Stats(); err == nil {
			cpu = st.CPUSeconds
		}
		ch <- cpu
	}()
	return costMeter{lastAt: time.Now(), base: sync.OnceValue(func() float64 { return <-ch })}
}

// sampleCost adds the kernel's use since the last sample to the session's consumption.
// Caller must not hold ls.mu.
func (ls *Session) sampleCost(ctx context.Context, k *kernel.Kernel) {
	ls.mu.Lock()
	base := ls.cost.base
	ls.mu.Unlock()
	var baseCPU float64
	if base != nil {
		baseCPU = base() // read before this sample's Stats: it is the earlier figure
	}
	st, err := k.Stats()
	if err != nil {
		return
	}
	ls.noteBackground(k, k.Background())
	now := time.Now()
	ls.mu.Lock()
	if ls.kern != k {
		ls.mu.Unlock()
		return
	}
	m := &ls.cost
	if m.base != nil && base != nil {
		m.lastCPU, m.base = baseCPU, nil
	}
	dCPU := st.CPUSeconds - m.lastCPU
	if dCPU < 0 {
		dCPU = 0
	}
	var dGiBh float64
	if !m.lastAt.IsZero() {
		dGiBh = float64(st.RSSBytes) / (1 << 30) * now.Sub(m.lastAt).Hours()
	}
	m.lastCPU, m.lastAt = st.CPUSeconds, now
	m.rss = st.RSSBytes
	newPeak := st.RSSBytes > ls.doc.MemoryPeakBytes
	ls.mu.Unlock()
	if dCPU == 0 && dGiBh == 0 && !newPeak {
		return
	}
	ls.addCost(ctx, dCPU, dGiBh, st.RSSBytes)
}

// addCost records CPU seconds and GiB-hours, recomputes cost_cents, and raises the session's
// memory peak to rss if rss is above it.
func (ls *Session) addCost(ctx context.Context, cpu, gibHours float64, rss int64) {
	s := ls.svc
	if _, err := ls.update(ctx, func(d *carryover.Session) error {
		s.cfg.chargeLocked(d, cpu, gibHours)
		d.MemoryPeakBytes = max(d.MemoryPeakBytes, rss)
		return nil
	}); err != nil {
		s.log.Error("cost not recorded", "session", ls.id, "err", err)
		s.m.RecordFailures.Inc()
	}
}

// chargeLocked adds use to the document and recomputes cost_cents (the caller is inside update).
func (c Config) chargeLocked(d *carryover.Session, cpu, gibHours float64) {
	b := &d.BudgetConsumed
	b.CPUSeconds += cpu
	b.MemoryGiBHours += gibHours
	b.CostCents = carryover.CostCents(*b, c.CPUSecondCents, c.GiBHourCents)
}

// sampleLiveCost samples the session's live kernel, if it has one (the background loop, each session).
func (ls *Session) sampleLiveCost(ctx context.Context) {
	if k := ls.currentKernel(); k != nil {
		ls.sampleCostIfStale(ctx, k)
	}
}

// sampleCostIfStale samples at most once a second per session: reading /proc costs about a
// millisecond, too much for every turn of a fast loop, and a second is fine-grained for a budget.
func (ls *Session) sampleCostIfStale(ctx context.Context, k *kernel.Kernel) {
	ls.mu.Lock()
	fresh := time.Since(ls.cost.lastAt) < time.Second
	ls.mu.Unlock()
	if !fresh {
		ls.sampleCost(ctx, k)
	}
}

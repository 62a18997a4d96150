package session

import (
	"context"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// sampleCost adds the kernel's use since the last sample to the session's consumption.
// Caller must not hold ls.mu.
func (ls *Session) sampleCost(ctx context.Context, k *kernel.Kernel) {
	ls.mu.Lock()
	base := ls.cost.PendingBase()
	ls.mu.Unlock()
	var baseCPU float64
	if base != nil {
		baseCPU = base() // read before this sample's Stats: it is the earlier figure
	}
	st, err := k.Stats()
	if err != nil {
		return
	}
	ls.notes.Background(k, k.Background())
	now := time.Now()
	ls.mu.Lock()
	if ls.kern != k {
		ls.mu.Unlock()
		return
	}
	dCPU, dGiBh := ls.cost.Sample(base != nil, baseCPU, st, now)
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
	ctx = context.WithoutCancel(ctx) // measured and taken from the meter: a cancellation must not drop it
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

// sampleLiveCost samples the session's live kernel, if it has one (the background loop, each
// session): each second while a run is in flight, whose budget is checked against it; every
// idleSampleEvery otherwise, when what accrues is mostly its memory's GiB-hours (a thread's CPU is
// charged all the same, later). Sampling idle kernels each second was a third of an idle node's CPU.
func (ls *Session) sampleLiveCost(ctx context.Context) {
	k := ls.currentKernel()
	ls.mu.Lock()
	stale := time.Since(ls.cost.LastAt()) >= time.Second && (ls.running != nil || time.Since(ls.cost.LastAt()) >= idleSampleEvery)
	ls.mu.Unlock()
	if k != nil && stale {
		ls.sampleCost(ctx, k)
	}
}

const idleSampleEvery = 5 * time.Second

// sampleCostIfStale samples at most once a second per session: reading /proc costs about a
// millisecond, too much for every turn of a fast loop, and a second is fine-grained for a budget.
func (ls *Session) sampleCostIfStale(ctx context.Context, k *kernel.Kernel) {
	ls.mu.Lock()
	fresh := time.Since(ls.cost.LastAt()) < time.Second
	ls.mu.Unlock()
	if !fresh {
		ls.sampleCost(ctx, k)
	}
}

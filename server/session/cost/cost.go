// Package cost is the cost model behind budget.cost_cap_cents: a meter per kernel that turns its
// CPU time and resident memory, sampled, into the use since the last sample.
package cost

import (
	"sync"
	"time"

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

// Meter remembers the last sample of the current kernel. Its owner guards it (the session's lock).
type Meter struct {
	lastCPU float64
	lastAt  time.Time
	rss     int64 // resident memory at the last sample (the memory pressure watch adds them up)
	shmem   int64 // the shared part of rss (kernel.ProcStats.ShmemBytes)
	own     int64 // what the kernel costs on its own, when known (kernel.ProcStats.OwnBytes)
	// base, until a sample has used it, gives the CPU the kernel had used when the session claimed
	// it (Baseline): the sample's starting point instead of lastCPU.
	base func() float64
}

// Baseline is the meter a just-claimed kernel starts with. The CPU the kernel used before the
// session had it (its start and the pool's warm-up imports) is not the session's to pay: the first
// sample used to charge it all. It is read from /proc (a few ms) in the background, off the first
// turn; the meter's time is the claim, so a short first turn takes no sample of its own.
func Baseline(k *kernel.Kernel) Meter {
	ch := make(chan float64, 1)
	go func() {
		cpu := 0.0
		if st, err := k.Stats(); err == nil {
			cpu = st.CPUSeconds
		}
		ch <- cpu
	}()
	return Meter{lastAt: time.Now(), base: sync.OnceValue(func() float64 { return <-ch })}
}

// Settle waits for the claim's CPU read (Baseline) when no sample has used it yet. It is called
// before the kernel gets its first cell: a read still pending then would land after the cell began
// and take the cell's CPU for the kernel's warm-up (under load a late read swallowed 0.18 s of a
// 0.6 s loop, and a cpu_seconds quota saw 0.42 s). Normally the read finished during the set-up and
// Settle does not wait.
func (m *Meter) Settle() {
	if m.base != nil {
		m.base()
	}
}

// PendingBase is the pending read of the CPU the kernel had when claimed (nil once a sample used it):
// the caller reads it before the sample's own Stats, outside its lock, and hands it to Sample.
func (m *Meter) PendingBase() func() float64 { return m.base }

// Sample advances the meter to st, taken at now, and returns the use since the last sample: CPU
// seconds and GiB-hours (resident memory integrated over the time since). hadBase: the caller read
// the baseline (baseCPU), which becomes the starting point of the first sample.
func (m *Meter) Sample(hadBase bool, baseCPU float64, st kernel.ProcStats, now time.Time) (cpu, gibHours float64) {
	if m.base != nil && hadBase {
		m.lastCPU, m.base = baseCPU, nil
	}
	cpu = max(st.CPUSeconds-m.lastCPU, 0)
	if !m.lastAt.IsZero() {
		gibHours = float64(st.RSSBytes) / (1 << 30) * now.Sub(m.lastAt).Hours()
	}
	m.lastCPU, m.lastAt = st.CPUSeconds, now
	m.rss, m.shmem, m.own = st.RSSBytes, st.ShmemBytes, st.OwnBytes
	return cpu, gibHours
}

// LastAt is when the last sample was taken (or the kernel claimed).
func (m *Meter) LastAt() time.Time { return m.lastAt }

// RSS is the kernel's resident memory at the last sample (the memory pressure watch adds them up).
func (m *Meter) RSS() int64 { return m.rss }

// Own is what the kernel's memory costs on its own at the last sample (kernel.ProcStats.OwnBytes;
// 0: not known).
func (m *Meter) Own() int64 { return m.own }

// Shmem is the shared part of RSS at the last sample (RssShmem: a fork child's mapping of the node's
// shared buffer copies is counted here).
func (m *Meter) Shmem() int64 { return m.shmem }

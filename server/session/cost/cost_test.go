package cost

import (
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

// TestSample: the first sample starts from the CPU the kernel had when claimed, not from zero (its
// start and warm-up are not the session's); memory is charged for the time since the last sample;
// a CPU figure that went back (a restarted process) charges nothing.
func TestSample(t *testing.T) {
	t0 := time.Now()
	m := Meter{lastAt: t0, base: func() float64 { return 3 }}
	base := m.PendingBase()
	cpu, gibh := m.Sample(base != nil, base(), kernel.ProcStats{CPUSeconds: 5, RSSBytes: 1 << 30}, t0.Add(time.Hour))
	if cpu != 2 || gibh != 1 || m.RSS() != 1<<30 || m.PendingBase() != nil || !m.LastAt().Equal(t0.Add(time.Hour)) {
		t.Fatalf("first sample: cpu %v, GiB-h %v, meter %+v", cpu, gibh, m)
	}
	cpu, gibh = m.Sample(false, 0, kernel.ProcStats{CPUSeconds: 1, RSSBytes: 2 << 30}, t0.Add(90*time.Minute))
	if cpu != 0 || gibh != 1 {
		t.Fatalf("second sample: cpu %v, GiB-h %v", cpu, gibh)
	}
}

// TestSettleWaitsForTheClaimsRead: Settle returns only once the claim's CPU read has landed, and
// the sample after it starts from that read (not from a later one).
func TestSettleWaitsForTheClaimsRead(t *testing.T) {
	read := make(chan float64)
	m := Meter{lastAt: time.Now(), base: sync.OnceValue(func() float64 { return <-read })}
	settled := make(chan struct{})
	go func() { m.Settle(); close(settled) }()
	select {
	case <-settled:
		t.Fatal("Settle returned before the claim's read landed")
	case <-time.After(50 * time.Millisecond):
	}
	read <- 2
	<-settled
	base := m.PendingBase()
	if cpu, _ := m.Sample(base != nil, base(), kernel.ProcStats{CPUSeconds: 2.6}, time.Now()); cpu < 0.59 || cpu > 0.61 {
		t.Fatalf("the first sample after Settle charged %g s, want the 0.6 s since the claim's read", cpu)
	}
	var zero Meter
	zero.Settle() // no pending read: returns at once
}

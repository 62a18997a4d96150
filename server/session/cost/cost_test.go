package cost

import (
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

package nodewatch

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carryover/carryover/server/capacity"
)

// TestReport: before the first reading the memory figures say unknown (-1) and the evictions are an
// empty map (JSON {}, not null); afterwards the report has the last reading and the counts by reason.
func TestReport(t *testing.T) {
	w := New(capacity.Budget{}, nil, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "h"}, []string{"reason"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "m"}))
	var st NodeStatus
	w.Report(&st)
	if st.Evictions == nil || len(st.Evictions) != 0 || st.Memory.AvailableBytes != -1 || st.Memory.PSIFullAvg10 != -1 {
		t.Fatalf("before a reading: %+v", st)
	}
	w.NoteMemory(300, capacity.HostMemory{AvailableBytes: 1000, PSIFullAvg10: 2.5})
	w.CountHibernation(capacity.ReasonMemory)
	w.CountHibernation(capacity.ReasonMemory)
	w.Report(&st)
	if st.Memory != (MemoryStatus{KernelBytes: 300, AvailableBytes: 1000, PSIFullAvg10: 2.5}) || st.Evictions[capacity.ReasonMemory] != 2 {
		t.Fatalf("after a reading and two hibernations: %+v", st)
	}
}

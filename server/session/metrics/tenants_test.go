package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestTenantSeriesBounded: with more tenants than maxTenantSeries the largest keep a series each
// and the rest are summed under _other, so /metrics stays bounded whatever the number of tenants.
func TestTenantSeriesBounded(t *testing.T) {
	var all []TenantSeries
	for i := range 30 {
		for range i + 1 { // tenant tNN has NN+1 sessions: the larger, the later
			all = append(all, TenantSeries{Tenant: fmt.Sprintf("t%02d", i), Sessions: 1, Hibernated: 1, CPUSeconds: 1})
		}
	}
	got := bound(all)
	if len(got) != maxTenantSeries+1 {
		t.Fatalf("%d series, want %d", len(got), maxTenantSeries+1)
	}
	if got[0].Tenant != "t29" || got[0].Sessions != 30 || got[0].Hibernated != 30 || got[0].CPUSeconds != 30 {
		t.Errorf("largest = %+v", got[0])
	}
	other := got[len(got)-1]
	if want := 10 * 11 / 2; other.Tenant != otherTenants || other.Sessions != want || other.CPUSeconds != float64(want) {
		t.Errorf("_other = %+v, want the 10 smallest tenants' %d sessions", other, want)
	}
	c := NewTenantCollector()
	c.Set(all)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if len(mf.GetMetric()) != maxTenantSeries+1 {
			t.Errorf("%s: %d series, want %d", mf.GetName(), len(mf.GetMetric()), maxTenantSeries+1)
		}
		if mf.GetName() != "carryover_tenant_sessions" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == otherTenants && m.GetGauge().GetValue() != 55 {
				t.Errorf("_other sessions = %v, want 55", m.GetGauge().GetValue())
			}
		}
	}
	if len(mfs) != 5 {
		t.Errorf("%d metric families, want 5", len(mfs))
	}
}

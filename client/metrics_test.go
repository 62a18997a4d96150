package client_test

import (
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestHealthAndMetrics: both answer without a token; a run shows up in the Prometheus text.
func TestHealthAndMetrics(t *testing.T) {
	ctx := testCtx(t)
	anon := client.New(baseURL, "")
	if err := anon.Health(ctx); err != nil {
		t.Fatalf("Health without a token: %v", err)
	}
	s := newSession(t, client.CreateRequest{})
	run(t, s.ID, "1")
	m, err := anon.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics without a token: %v", err)
	}
	if !strings.Contains(m, "# TYPE carryover_runs_total counter") || !strings.Contains(m, `carryover_runs_total{status="ok"}`) {
		t.Fatalf("metrics: %.400s", m)
	}
}

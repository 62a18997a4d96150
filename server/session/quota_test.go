package session

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestQuotaSessionsConcurrentCreates: 12 creates at once of a tenant whose quota is 5 sessions:
// exactly 5 succeed, every other is quota_exceeded naming the quota, limit and use; another tenant
// is not limited.
func TestQuotaSessionsConcurrentCreates(t *testing.T) {
	s, _, _ := testService(t, func(c *Config) {
		c.Quotas = func(tenant string) carryover.Quotas {
			if tenant == "small" {
				return carryover.Quotas{Sessions: 5}
			}
			return carryover.Quotas{}
		}
	})
	small := carryover.NewContextWithTenant(context.Background(), "small")
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.Create(small, CreateRequest{SessionID: fmt.Sprintf("q%d", i)})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		e := carryover.ErrorOf(err)
		if e.Code != carryover.CodeQuotaExceeded || e.Details["quota"] != "sessions" || e.Details["limit"] != 5 || e.Details["use"] != 5 {
			t.Fatalf("refusal %v (details %v)", err, e.Details)
		}
	}
	if ok != 5 {
		t.Fatalf("%d creates succeeded, want 5", ok)
	}
	other := carryover.NewContextWithTenant(context.Background(), "other")
	for i := range 7 {
		if _, err := s.Create(other, CreateRequest{SessionID: fmt.Sprintf("o%d", i)}); err != nil {
			t.Fatalf("another tenant's create %d: %v", i, err)
		}
	}
}

// TestQuotaCPUWindow: CPU counts from the start of the period (a session made before it from its
// CPU then, one made in it from zero) and starts again at the next period.
func TestQuotaCPUWindow(t *testing.T) {
	var g quotaGate
	start := time.Unix(7200, 0)
	created := map[string]time.Time{"old": start.Add(-time.Minute), "new": start.Add(time.Second)}
	used := g.cpuUsedLocked("t", time.Hour, start.Add(10*time.Second), map[string]float64{"old": 100, "new": 2}, created)
	if used != 2 {
		t.Fatalf("first look: %g, want 2 (the old session's 100 s are from before the period)", used)
	}
	used = g.cpuUsedLocked("t", time.Hour, start.Add(20*time.Second), map[string]float64{"old": 103, "new": 4}, created)
	if used != 7 {
		t.Fatalf("later: %g, want 3 + 4", used)
	}
	used = g.cpuUsedLocked("t", time.Hour, start.Add(time.Hour+time.Second), map[string]float64{"old": 104, "new": 5}, created)
	if used != 0 {
		t.Fatalf("next period: %g, want 0", used)
	}
	if used := g.cpuUsedLocked("u", time.Hour, start.Add(time.Hour+time.Second), map[string]float64{"x": 9}, map[string]time.Time{"x": start}); used != 0 {
		t.Fatalf("another tenant shares the window: %g", used)
	}
}

// TestQuotaRefusalTakesNoSlot: a turn refused for the tenant's live_kernels quota takes no slot of
// the node (it held one for ever, and could hibernate another session to make room for nothing).
func TestQuotaRefusalTakesNoSlot(t *testing.T) {
	s, _, _ := testService(t, func(c *Config) {
		c.MaxLiveKernels = 4
		c.Quotas = func(tenant string) carryover.Quotas { return carryover.Quotas{LiveKernels: 1} }
	})
	ctx := carryover.NewContextWithTenant(context.Background(), "small")
	if _, err := s.Create(ctx, CreateRequest{SessionID: "q"}); err != nil {
		t.Fatal(err)
	}
	release, err := s.reserveKernel("small", "another") // the tenant's one live kernel, elsewhere
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for range 3 {
		_, err := s.Run(ctx, "q", RunRequest{Code: "1+1"}, RunOptions{})
		wantCode(t, err, carryover.CodeQuotaExceeded)
	}
	if held := s.slots.stats().Held; held != 0 {
		t.Fatalf("%d slots held after three refusals, want 0", held)
	}
}

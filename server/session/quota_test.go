package session

import (
	"context"
	"fmt"
	"sync"
	"testing"

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

// TestQuotaRefusalTakesNoSlot: a turn refused for the tenant's live_kernels quota takes no slot of
// the node (it held one for ever, and could hibernate another session to make room for nothing).
func TestQuotaRefusalTakesNoSlot(t *testing.T) {
	s, _, _ := testService(t, func(c *Config) {
		c.MaxLiveKernels = 4
		c.Quotas = func(tenant string) carryover.Quotas { return carryover.Quotas{LiveKernels: 1} }
	})
	ctx := carryover.NewContextWithTenant(context.Background(), "small")
	for _, id := range []string{"q", "another"} {
		if _, err := s.Create(ctx, CreateRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	holdKernel(t, s, "another") // the tenant's one live kernel
	for range 3 {
		_, err := handleOf(t, s, "q").Run(ctx, RunRequest{Code: "1+1"}, RunOptions{})
		wantCode(t, err, carryover.CodeQuotaExceeded)
	}
	if held := s.adm.ledger.Stats().Held; held != 1 {
		t.Fatalf("%d slots held after three refusals, want 1 (the other session's)", held)
	}
}

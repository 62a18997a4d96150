package server_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

// TestForkFanOut: a session holding a variable forked into 5 children in one call; each child's
// first run sees the parent's value, and one child's write is seen by none of its siblings nor the
// parent. Refusals create nothing: a count out of 1..100 (400), another tenant's checkpoint (404),
// a fan-out past the tenant's sessions quota (429, all or nothing); at the quota, even one more.
func TestForkFanOut(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) {
		c.Auth.Tenants = map[string]string{"small": "small-token", "other": "other-token"}
		c.Tenants = map[string]configs.TenantConfig{"small": {Quotas: configs.TenantQuotas{Sessions: intp(6)}}}
	})
	small, other := newClient(ts.base, "small-token"), newClient(ts.base, "other-token")
	ctx, id := t.Context(), servertest.ID(t)
	src := id + "-src"
	if _, err := small.CreateSession(ctx, client.CreateRequest{SessionID: src}); err != nil {
		t.Fatal(err)
	}
	if _, err := small.Run(ctx, src, client.RunRequest{Code: "v = {'n': 41}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CreateSession(ctx, client.CreateRequest{SessionID: id + "-o"}); err != nil {
		t.Fatal(err)
	}
	r, err := other.Run(ctx, id+"-o", client.RunRequest{Code: "secret = 1"})
	if err != nil || r.Checkpoint == nil {
		t.Fatalf("other tenant's run: %v %s", err, dump(r))
	}
	for _, n := range []int{-1, 101} {
		errCode(t, errOf(small.ForkMany(ctx, src, client.ForkRequest{Count: n})), 400, "invalid_request")
	}
	errCode(t, errOf(small.ForkMany(ctx, src, client.ForkRequest{Count: 2, CheckpointID: r.Checkpoint.ID})), 404, "not_found")
	err = errOf(small.ForkMany(ctx, src, client.ForkRequest{Count: 6, SessionID: id + "-kid"}))
	quotaErr(t, err, "sessions", 6)
	if e := (*client.Error)(nil); !errors.As(err, &e) || e.Details["requested"] != 6.0 {
		t.Fatalf("over-quota fan-out: %v", err)
	}
	if all, err := small.ListSessions(ctx); err != nil || len(all) != 1 {
		t.Fatalf("sessions after refused fan-outs: %d (%v), want 1", len(all), err)
	}

	kids, err := small.ForkMany(ctx, src, client.ForkRequest{Count: 5, SessionID: id + "-kid"})
	if err != nil || len(kids) != 5 {
		t.Fatalf("fan-out of 5: %d children, %v", len(kids), err)
	}
	for i, k := range kids {
		if k.ID != fmt.Sprintf("%s-kid-%d", id, i+1) || k.State != "pending" || k.LastCheckpoint == nil {
			t.Fatalf("child %d: %s", i, dump(k))
		}
	}
	run := func(sid, code string) (string, error) {
		res, err := small.Run(ctx, sid, client.RunRequest{Code: code})
		if err != nil {
			return "", fmt.Errorf("run in %s: %w", sid, err)
		}
		return resultOf(res), nil
	}
	if got, err := run(kids[0].ID, "v['n'] = 100\nv['n']"); err != nil || got != "100" {
		t.Fatalf("first child's write: %q %v", got, err)
	}
	// The siblings' first runs at once, each claiming its kernel as any session does.
	got, errs := make([]string, len(kids)), make([]error, len(kids))
	var wg sync.WaitGroup
	for i, k := range kids[1:] {
		wg.Go(func() { got[i+1], errs[i+1] = run(k.ID, "v['n']") })
	}
	wg.Wait()
	for i := 1; i < len(kids); i++ {
		if errs[i] != nil || got[i] != "41" {
			t.Fatalf("child %s sees %q (%v), want the parent's 41 (not its sibling's write)", kids[i].ID, got[i], errs[i])
		}
	}
	if got, err := run(src, "v['n']"); err != nil || got != "41" {
		t.Fatalf("the parent sees %q (%v) after a child's write", got, err)
	}
	quotaErr(t, errOf(small.Fork(ctx, src, client.ForkRequest{})), "sessions", 6)
}

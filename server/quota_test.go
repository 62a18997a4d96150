package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

// quotaErr asserts a 429 quota_exceeded naming quota, its limit and its use, in the message and in
// the details; it returns the use.
func quotaErr(t *testing.T, err error, quota string, limit float64) float64 {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 429 || e.Code != "quota_exceeded" {
		t.Fatalf("want 429 quota_exceeded of %s, got %v", quota, err)
	}
	use, ok := e.Details["use"].(float64)
	if e.Details["quota"] != quota || e.Details["limit"] != limit || !ok {
		t.Fatalf("details %v, want quota %s, limit %g and a use", e.Details, quota, limit)
	}
	if !strings.Contains(e.Message, quota) || !strings.Contains(e.Message, strconv.FormatFloat(limit, 'f', -1, 64)) {
		t.Fatalf("message %q does not name the quota and its limit", e.Message)
	}
	return use
}

func intp(n int) *int { return &n }

// TestQuotaSessionsAndLiveKernels: a tenant with quotas sessions 2 and live_kernels 1 gets 429s
// naming each quota, its limit and its use; a kernel freed (hibernation) lets its next run through;
// another tenant, without quotas, is unaffected throughout.
func TestQuotaSessionsAndLiveKernels(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) {
		c.Auth.Tenants = map[string]string{"small": "small-token", "big": "big-token"}
		c.Tenants = map[string]configs.TenantConfig{"small": {Quotas: configs.TenantQuotas{Sessions: intp(2), LiveKernels: intp(1)}}}
	})
	small, big := newClient(ts.base, "small-token"), newClient(ts.base, "big-token")
	id := servertest.ID(t)
	create := func(c *client.Client, sid string) error {
		return errOf(c.CreateSession(t.Context(), client.CreateRequest{SessionID: sid}))
	}
	run := func(c *client.Client, sid, code string) (*client.RunResult, error) {
		return c.Run(t.Context(), sid, client.RunRequest{Code: code})
	}
	for _, sid := range []string{id + "-s1", id + "-s2"} {
		if err := create(small, sid); err != nil {
			t.Fatal(err)
		}
	}
	if use := quotaErr(t, create(small, id+"-s3"), "sessions", 2); use != 2 {
		t.Fatalf("sessions use %g, want 2", use)
	}
	if r, err := run(small, id+"-s1", "x = 1; x"); err != nil || resultOf(r) != "1" {
		t.Fatalf("first kernel: %v %s", err, dump(r))
	}
	_, err := run(small, id+"-s2", "y = 2")
	if use := quotaErr(t, err, "live_kernels", 1); use != 1 {
		t.Fatalf("live_kernels use %g, want 1", use)
	}
	_, err = small.Execute(t.Context(), client.ExecuteRequest{Code: "1"}) // a throwaway kernel is a live one too
	quotaErr(t, err, "live_kernels", 1)
	for i := 1; i <= 3; i++ { // big has no quotas: three sessions, three kernels
		sid := fmt.Sprintf("%s-b%d", id, i)
		if err := create(big, sid); err != nil {
			t.Fatalf("big's create %d: %v", i, err)
		}
		if r, err := run(big, sid, "2+2"); err != nil || resultOf(r) != "4" {
			t.Fatalf("big's run %d: %v %s", i, err, dump(r))
		}
	}
	must(t, 200, "hibernate s1", func(ctx context.Context) (*client.Session, error) { return small.Hibernate(ctx, id+"-s1") })
	if r, err := run(small, id+"-s2", "y = 2; y"); err != nil || resultOf(r) != "2" {
		t.Fatalf("run once the kernel was freed: %v %s", err, dump(r))
	}
	_, err = run(small, id+"-s1", "x")
	quotaErr(t, err, "live_kernels", 1)
	mustDo(t, 204, "delete s2", func(ctx context.Context) error { return small.DeleteSession(ctx, id+"-s2") })
	if err := create(small, id+"-s3"); err != nil {
		t.Fatalf("create after a delete: %v", err)
	}
	if r, err := run(small, id+"-s1", "x"); err != nil || resultOf(r) != "1" {
		t.Fatalf("s1 after its kernel came back: %v %s", err, dump(r))
	}
}

// TestQuotaStoredBytesAndCPU: a tenant at its stored_bytes quota, then one at its cpu_seconds
// quota, gets 429s naming the quota, its limit and its use; another tenant runs on.
func TestQuotaStoredBytesAndCPU(t *testing.T) {
	t.Parallel()
	stored, cpu := int64(20000), 0.3
	ts := startServer(t, "", func(c *configs.Config) {
		c.Auth.Tenants = map[string]string{"disk": "disk-token", "cpu": "cpu-token", "other": "other-token"}
		c.Tenants = map[string]configs.TenantConfig{
			"disk": {Quotas: configs.TenantQuotas{StoredBytes: &stored}},
			"cpu":  {Quotas: configs.TenantQuotas{CPUSeconds: &cpu}},
		}
	})
	id := servertest.ID(t)
	disk, cpuc, other := newClient(ts.base, "disk-token"), newClient(ts.base, "cpu-token"), newClient(ts.base, "other-token")
	run := func(c *client.Client, sid, code string) (*client.RunResult, error) {
		return c.Run(t.Context(), sid, client.RunRequest{Code: code})
	}
	sd, sc, so := id+"-disk", id+"-cpu", id+"-other"
	for _, p := range []struct {
		c   *client.Client
		sid string
	}{{disk, sd}, {cpuc, sc}, {other, so}} {
		if _, err := p.c.CreateSession(t.Context(), client.CreateRequest{SessionID: p.sid}); err != nil {
			t.Fatal(err)
		}
	}
	// Random bytes do not compress: the checkpoint stores about 100 kB.
	if _, err := run(disk, sd, "import os; blob = os.urandom(100_000)"); err != nil {
		t.Fatal(err)
	}
	_, err := run(disk, sd, "len(blob)")
	if use := quotaErr(t, err, "stored_bytes", float64(stored)); use < 100_000 {
		t.Fatalf("stored_bytes use %g, want the blob's 100 kB at least", use)
	}
	_, err = disk.Exec(t.Context(), sd, client.ExecRequest{Command: "true"})
	quotaErr(t, err, "stored_bytes", float64(stored))

	if _, err := run(cpuc, sc, "import time\nt0 = time.process_time()\nwhile time.process_time() - t0 < 0.6: pass"); err != nil {
		t.Fatal(err)
	}
	_, err = run(cpuc, sc, "1")
	if use := quotaErr(t, err, "cpu_seconds", cpu); use < 0.5 {
		t.Fatalf("cpu_seconds use %g, want the loop's 0.6 s at least", use)
	}
	if r, err := run(other, so, "import os; b = os.urandom(100_000); len(b)"); err != nil || resultOf(r) != "100000" {
		t.Fatalf("another tenant: %v %s", err, dump(r))
	}
	if r, err := run(other, so, "len(b)"); err != nil || resultOf(r) != "100000" {
		t.Fatalf("another tenant, again: %v %s", err, dump(r))
	}
}

// TestRateLimit: a key over its token bucket gets 429 rate_limited with Retry-After and the limit
// in the details; another credential (another tenant's token) is unaffected meanwhile.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) {
		c.Auth.Tenants = map[string]string{"other": "other-token"}
		c.Auth.RateLimit.RequestsPerSecond = 0.01 // one token per 100 s: the test never sees a refill
		c.Auth.RateLimit.Burst = 3
	})
	k := ts.createKey("acme", client.ScopeRead)
	get := func(token string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.base+"/api/sessions", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for i := range 3 {
		if res := get(k.Secret); res.StatusCode != 200 {
			t.Fatalf("request %d of the burst: %d", i+1, res.StatusCode)
		}
	}
	res := get(k.Secret)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("over the burst: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if ra, _ := strconv.Atoi(res.Header.Get("Retry-After")); ra < 90 || ra > 100 {
		t.Fatalf("Retry-After %q, want about 100 s (one token at 0.01/s)", res.Header.Get("Retry-After"))
	}
	_, err := newClient(ts.base, k.Secret).ListSessions(t.Context())
	var e *client.Error
	if !errors.As(err, &e) || e.Code != "rate_limited" || e.Details["limit"] != 0.01 || e.Details["burst"] != 3.0 {
		t.Fatalf("rate limited answer: %v (details %v)", err, e)
	}
	for i := range 3 {
		if res := get("other-token"); res.StatusCode != 200 {
			t.Fatalf("another tenant's request %d: %d", i+1, res.StatusCode)
		}
	}
}

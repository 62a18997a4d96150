package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/carryover/carryover/internal/servertest"
)

// serve logs the host check at start: its summary, and a failing check with its fix before the
// SANDBOX UNAVAILABLE it explains (here a bogus sandbox.bwrap).
func TestServeLogsHostCheck(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t.TempDir())
	cfg.Pool.Size = 0
	cfg.Sandbox.Enabled = true
	cfg.Sandbox.Bwrap = "/nonexistent/bwrap"
	var log servertest.SyncBuffer
	srv, err := servertest.New(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	out := log.String()
	for _, want := range []string{`msg="host check: bubblewrap FAILED"`, "apt-get install bubblewrap", `msg="host check (carryover doctor for details):`, "fail:bubblewrap"} {
		if !strings.Contains(out, want) {
			t.Errorf("the start log has no %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "host check: bubblewrap FAILED"), strings.Index(out, "SANDBOX UNAVAILABLE"); i < 0 || j < 0 || i > j {
		t.Errorf("the failing check should come before SANDBOX UNAVAILABLE:\n%s", out)
	}
}

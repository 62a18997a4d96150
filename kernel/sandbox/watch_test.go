package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

// TestLimitHitsAreReported: a kernel whose processes hit the box's process limit is told so (the
// watch's report, as a session's sandbox_limit_exceeded event), its strays are killed and it keeps
// its state; a process of the box killed by the OOM killer for the memory limit is reported and the
// kernel survives. The watches are woken by the provisioner's one poller of the boxes' counters
// (watch_poll.go), so this is also the test that the poller wakes them.
func TestLimitHitsAreReported(t *testing.T) {
	m := newManager(t)
	spool := t.TempDir()
	p := NewProvisioner(m, ProvisionerConfig{Defaults: Limits{Pids: 48}, MaxCPUs: 2, MaxMemory: 2 << 30, SpoolDir: spool})
	k := startBoxedKernel(t, p)
	hits := make(chan kernel.LimitHit, 16)
	bk := k.Process().(*boxKernel)
	bk.OnLimit(func(h kernel.LimitHit) { hits <- h })
	ctx := context.Background()
	eval := func(code string) string {
		t.Helper()
		out, err := k.Eval(ctx, code, "_r")
		if err != nil {
			t.Fatalf("%s: %v", code, err)
		}
		return out
	}
	eval("state = 41; _r = 0")
	// Children that sleep, forked until the limit refuses one.
	got := eval("import os, time\n_p = []\ntry:\n    while len(_p) < 200:\n        _c = os.fork()\n        if _c == 0:\n            time.sleep(120)\n            os._exit(0)\n        _p.append(_c)\nexcept BlockingIOError:\n    pass\n_r = len(_p)")
	t.Logf("%s children forked before the limit", got)
	waitHit(t, hits, "pids", "processes were killed; the kernel and its state were kept")
	// The killed children are the kernel's to reap (zombies count against the limit).
	if got := eval("_r = state + 1\nfor _c in _p:\n    os.waitpid(_c, 0)"); got != "42" {
		t.Fatalf("the kernel after its strays were killed: %q", got)
	}
	// A child allocating past the memory limit: the OOM killer takes it, not the kernel.
	if err := bk.SetLimits(kernel.Limits{Memory: "256Mi"}); err != nil {
		t.Fatal(err)
	}
	eval("_c = os.fork()\nif _c == 0:\n    _b = bytearray(600 << 20)\n    os._exit(0)\n_r = os.waitpid(_c, 0)[1]")
	waitHit(t, hits, "memory", "a process of the sandbox was killed by the out-of-memory killer; the kernel survived")
	if got := eval("_r = state + 1"); got != "42" {
		t.Fatalf("the kernel after its child's OOM kill: %q", got)
	}
}

// waitHit waits for a report of kind whose message contains want (other reports are skipped).
func waitHit(t *testing.T, hits <-chan kernel.LimitHit, kind, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case h := <-hits:
			t.Logf("limit hit: %s: %s", h.Kind, h.Message)
			if h.Kind == kind && strings.Contains(h.Message, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no %s limit hit saying %q within 20 s", kind, want)
		}
	}
}

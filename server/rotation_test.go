package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// waitFor polls cond every 100 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

// indexOrder asserts the events appear in this relative order.
func inOrder(t *testing.T, types []string, want ...string) {
	t.Helper()
	i := 0
	for _, ty := range types {
		if i < len(want) && ty == want[i] {
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("events %v do not contain %v in order", types, want)
	}
}

// TestRotationKeepsState: timeout_seconds=6 and buffer 3 rotate the kernel about every 3 s;
// variables and files survive and the events come in order.
func TestRotationKeepsState(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	s := ts.newSession(client.CreateRequest{SessionID: "rot", Sandbox: &client.SandboxRequest{TimeoutSeconds: client.Seconds(6)},
		Rotation: &client.Rotation{PreRotateBufferSeconds: 3}, Start: true})
	first := s.Sandbox.ID
	ts.run("rot", "import math\nitems = [1, 2, 3]\ndef double(x):\n    return 2 * x\nopen('notes.txt', 'w').write('kept')")
	waitFor(t, 20*time.Second, "rotation_completed", func() bool {
		return len(ts.eventTypes("rot", 0, "rotation_completed")) > 0
	})
	if s = ts.session("rot"); s.Sandbox.ID == first || s.State != "running" {
		t.Fatalf("sandbox not rotated: %s", dump(s))
	}
	out := ts.run("rot", "print(items, double(21), math.pi > 3, open('notes.txt').read())")
	if out.Stdout != "[1, 2, 3] 42 True kept\n" {
		t.Fatalf("state lost in rotation: %s", dump(out))
	}
	types := ts.eventTypes("rot", 200, "")
	inOrder(t, types, "rotation_started", "checkpoint_created", "sandbox_created", "checkpoint_restored", "sandbox_terminated", "rotation_completed")
}

// TestForcedRotationWaitsForRun: POST /rotate during a run waits for it; the next run uses the new kernel.
func TestForcedRotationWaitsForRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "fr"})
	ts.run("fr", "n = 1")
	done := ts.goRun("fr", client.RunRequest{Code: "import time\nprint('started', flush=True)\ntime.sleep(1)\nn += 1"})
	ts.waitOutput(t, "fr", "started")
	before := ts.session("fr").Sandbox.ID
	s := ts.act(ts.c.Rotate, "fr")
	if rr := <-done; rr.err != nil || rr.status != 200 || rr.res.Status != "ok" {
		t.Fatalf("run during rotation: %d %v %s", rr.status, rr.err, dump(rr.res))
	}
	if s.Sandbox.ID == before {
		t.Fatalf("not rotated: %s", dump(s))
	}
	if out := ts.run("fr", "n"); resultOf(out) != "2" {
		t.Fatalf("run after rotation: %s", dump(out))
	}
}

// TestHibernationAndWake: an idle session is checkpointed and its kernel stopped; the next run
// restores it transparently; heartbeats keep a kernel alive.
func TestHibernationAndWake(t *testing.T) {
	// Not parallel: heartbeats every 0.5 s must beat a 2 s idle limit, which a loaded machine can delay.
	ts := startServer(t, "", func(c *configs.Config) {
		c.Cull.IdleSeconds = 2
		c.Cull.IntervalSeconds = 0.2
	})
	ts.newSession(client.CreateRequest{SessionID: "sleepy"})
	ts.newSession(client.CreateRequest{SessionID: "awake"})
	ts.run("sleepy", "import numpy as np\narr = np.arange(10)\nlabel = 'zz'")
	ts.run("awake", "w = 5")
	stop, stopped := make(chan struct{}), make(chan struct{})
	ctx := ts.ctx()
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				_, _ = ts.c.Heartbeat(ctx, "awake")
			}
		}
	}()
	waitFor(t, 15*time.Second, "hibernation", func() bool {
		return ts.session("sleepy").Sandbox.Status == "hibernated"
	})
	if s := ts.session("sleepy"); s.State != "running" {
		t.Fatalf("hibernated session should stay running: %s", dump(s))
	}
	if st := ts.session("awake").Sandbox.Status; st != "live" {
		t.Fatalf("heartbeats did not keep the kernel: %s", st)
	}
	close(stop)
	<-stopped
	start := time.Now()
	out := ts.run("sleepy", "print(arr.sum(), label)")
	if out.Stdout != "45 zz\n" {
		t.Fatalf("wake-up lost state: %s", dump(out))
	}
	t.Logf("wake-up run took %s", time.Since(start))
	types := ts.eventTypes("sleepy", 200, "")
	inOrder(t, types, "session_hibernated", "sandbox_created", "checkpoint_restored")

	// Asked for explicitly, and across a server restart.
	if s := ts.act(ts.c.Hibernate, "sleepy"); s.Sandbox.Status != "hibernated" {
		t.Fatalf("hibernate: %s", dump(s))
	}
	ts = ts.restart()
	if out := ts.run("sleepy", "print(arr.sum(), label)"); out.Stdout != "45 zz\n" {
		t.Fatalf("wake-up after restart lost state: %s", dump(out))
	}
}

// TestCostIsMeasured: CPU burnt in the kernel shows up in budget_consumed and cost_cents.
func TestCostIsMeasured(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "cost", Budget: &client.Budget{CostCapCents: 0.001}})
	ts.run("cost", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass")
	s := ts.session("cost")
	if cpu, cents := s.BudgetConsumed.CPUSeconds, s.BudgetConsumed.CostCents; cpu < 0.4 || cents <= 0 {
		t.Fatalf("cost not measured: %s", dump(s))
	}
	errCode(t, errOf(ts.c.Run(ts.ctx(), "cost", client.RunRequest{Code: "1"})), 402, "budget_exceeded")
	if !strings.Contains(strings.Join(ts.eventTypes("cost", 100, ""), ","), "budget_exceeded") {
		t.Fatal("no budget_exceeded event")
	}
}

// TestShutdownChargesTheKernelsLastUse: the CPU a kernel used after its last cost sample (a thread
// that burns 0.3 s once its turn has ended, within the second before the next sample) is charged
// when the server shuts down, not dropped with the kernel.
func TestShutdownChargesTheKernelsLastUse(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "last"})
	ts.run("last", "import threading, time")
	before := ts.session("last").BudgetConsumed.CPUSeconds
	// the turn lasts over 100 ms, so it is sampled as it ends, the burn at most begun
	ts.run("last", "def burn():\n    t = time.thread_time()\n"+
		"    while time.thread_time() - t < 0.3: pass\n    open('burnt', 'w').close()\n"+
		"time.sleep(0.15)\nthreading.Thread(target=burn).start()")
	for ts.raw("GET", "/api/sessions/last/files/burnt", "").Status != 200 {
		time.Sleep(20 * time.Millisecond)
	}
	ts = ts.restart()
	if after := ts.session("last").BudgetConsumed.CPUSeconds; after < before+0.28 { // (/proc counts in 10 ms ticks)
		t.Fatalf("CPU charged: %.3f s before the burn's turn, %.3f s after the shutdown; want the burn's 0.3 s in it", before, after)
	}
}

// TestAgentFlowsSurviveRestart: a server restart between steps of rotation, hibernation and budget
// flows loses nothing committed.
func TestAgentFlowsSurviveRestart(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "ar", Budget: &client.Budget{IterationLimit: 4}, ClientID: "cli"})
	ts.run("ar", "x = 10")
	ts.act(ts.c.Rotate, "ar")
	ts = ts.restart()
	if r := ts.run("ar", "x += 1\nx"); resultOf(r) != "11" {
		t.Fatalf("after restart: %s", dump(r))
	}
	ts.act(ts.c.Pause, "ar")
	ts = ts.restart()
	if s := ts.session("ar"); s.State != "paused" || s.BudgetConsumed.Iterations != 2 {
		t.Fatalf("state after restart: %s", dump(s))
	}
	ts.act(ts.c.Resume, "ar")
	if s := ts.act(ts.c.Reattach, "cli"); s.ID != "ar" {
		t.Fatalf("reattach: %s", dump(s))
	}
	ts.run("ar", "x += 1")
	ts = ts.restart()
	ts.run("ar", "x += 1")
	errCode(t, errOf(ts.c.Run(ts.ctx(), "ar", client.RunRequest{Code: "x"})), 402, "budget_exceeded")
	types := ts.eventTypes("ar", 200, "")
	inOrder(t, types, "rotation_completed", "session_paused", "session_resumed", "budget_warning", "budget_exceeded")
}

// TestStopDuringRotationWaits: a stop that arrives while the session is rotating waits for the
// rotation and then completes the session (it is not refused because the state is "rotating").
func TestStopDuringRotationWaits(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "rs"})
	ts.run("rs", "import numpy as np\nbig = np.random.rand(1 << 25)") // 256 MB: rotation takes a while
	type answer struct {
		s      *client.Session
		status int
		err    error
	}
	rotated := make(chan answer, 1)
	rctx, rstatus := withStatus(ts.ctx())
	go func() {
		s, err := ts.c.Rotate(rctx, "rs")
		rotated <- answer{s, *rstatus, err}
	}()
	waitFor(t, 10*time.Second, "rotating state", func() bool {
		return ts.session("rs").State == "rotating"
	})
	s := must(t, 200, "stop", func(ctx context.Context) (*client.Session, error) { return ts.c.Stop(ctx, "rs", "done") })
	if s.State != "completed" {
		t.Fatalf("stop: %s", dump(s))
	}
	if rr := <-rotated; rr.err != nil || rr.status != 200 {
		t.Fatalf("rotate: %d %v %s", rr.status, rr.err, dump(rr.s))
	}
	types := ts.eventTypes("rs", 100, "")
	inOrder(t, types, "rotation_started", "rotation_completed", "session_completed")
}

// TestThousandsOfSessions: a thousand sessions exist, only the ones that ran hold a kernel.
func TestThousandsOfSessions(t *testing.T) {
	t.Parallel() // carryover_kernels_live is this server's: on its own registry
	ts := startServer(t, "")
	gauge := func() float64 {
		var v float64
		fmt.Sscan(strings.TrimPrefix(lineWithPrefix(ts.metrics(), "carryover_kernels_live "), "carryover_kernels_live "), &v)
		return v
	}
	if before := gauge(); before != 0 {
		t.Fatalf("a new server counts %g live kernels", before)
	}
	for i := 0; i < 1000; i++ {
		ts.newSession(client.CreateRequest{SessionID: fmt.Sprintf("many-%04d", i)})
	}
	for _, id := range []string{"many-0001", "many-0500", "many-0999"} {
		ts.run(id, "x = 1")
	}
	list := must(t, 200, "list", ts.c.ListSessions)
	live := 0
	for _, s := range list {
		if s.Sandbox.Status == "live" {
			live++
		}
	}
	if n := len(list); n != 1000 || live != 3 {
		t.Fatalf("%d sessions, %d live", n, live)
	}
	if n := gauge(); n != 3 {
		t.Fatalf("%g kernels attached to sessions, want 3", n)
	}
}

// lineWithPrefix returns the first line of s that starts with prefix.
func lineWithPrefix(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

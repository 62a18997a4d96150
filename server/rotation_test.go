package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
	ts := startServer(t, "")
	r := ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "rot", "sandbox": map[string]any{"timeout_seconds": 6},
		"rotation": map[string]any{"pre_rotate_buffer_seconds": 3}, "start": true})
	first := r.str("session", "sandbox", "id")
	ts.run("rot", "import math\nitems = [1, 2, 3]\ndef double(x):\n    return 2 * x\nopen('notes.txt', 'w').write('kept')")
	waitFor(t, 20*time.Second, "rotation_completed", func() bool {
		return len(eventTypes(ts.must(200, "GET", "/api/sessions/rot/events?event_type=rotation_completed", nil))) > 0
	})
	r = ts.must(200, "GET", "/api/sessions/rot", nil)
	if r.str("session", "sandbox", "id") == first || r.str("session", "state") != "running" {
		t.Fatalf("sandbox not rotated: %s", r.Body)
	}
	out := ts.run("rot", "print(items, double(21), math.pi > 3, open('notes.txt').read())")
	if out.str("stdout") != "[1, 2, 3] 42 True kept\n" {
		t.Fatalf("state lost in rotation: %s", out.Body)
	}
	types := eventTypes(ts.must(200, "GET", "/api/sessions/rot/events?limit=200", nil))
	inOrder(t, types, "rotation_started", "checkpoint_created", "sandbox_created", "checkpoint_restored", "sandbox_terminated", "rotation_completed")
}

// TestForcedRotationWaitsForRun: POST /rotate during a run waits for it; the next run uses the new kernel.
func TestForcedRotationWaitsForRun(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "fr"})
	ts.run("fr", "n = 1")
	done := make(chan resp, 1)
	go func() {
		done <- ts.do("POST", "/api/sessions/fr/run", map[string]any{"code": "import time\ntime.sleep(1)\nn += 1"})
	}()
	time.Sleep(200 * time.Millisecond)
	before := ts.must(200, "GET", "/api/sessions/fr", nil).str("session", "sandbox", "id")
	r := ts.must(200, "POST", "/api/sessions/fr/rotate", nil)
	if rr := <-done; rr.Status != 200 || rr.str("status") != "ok" {
		t.Fatalf("run during rotation: %s", rr.Body)
	}
	if r.str("session", "sandbox", "id") == before {
		t.Fatalf("not rotated: %s", r.Body)
	}
	if out := ts.run("fr", "n"); out.str("result") != "2" {
		t.Fatalf("run after rotation: %s", out.Body)
	}
}

// TestHibernationAndWake: an idle session is checkpointed and its kernel stopped; the next run
// restores it transparently; heartbeats keep a kernel alive.
func TestHibernationAndWake(t *testing.T) {
	ts := startServer(t, "", func(c *configs.Config) {
		c.Cull.IdleSeconds = 2
		c.Cull.IntervalSeconds = 0.2
	})
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "sleepy"})
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "awake"})
	ts.run("sleepy", "import numpy as np\narr = np.arange(10)\nlabel = 'zz'")
	ts.run("awake", "w = 5")
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				req, _ := http.NewRequest("POST", ts.base+"/api/sessions/awake/heartbeat", nil)
				req.Header.Set("Authorization", "Bearer "+testToken)
				if res, err := http.DefaultClient.Do(req); err == nil {
					res.Body.Close()
				}
			}
		}
	}()
	waitFor(t, 15*time.Second, "hibernation", func() bool {
		return ts.must(200, "GET", "/api/sessions/sleepy", nil).str("session", "sandbox", "status") == "hibernated"
	})
	r := ts.must(200, "GET", "/api/sessions/sleepy", nil)
	if r.str("session", "state") != "running" {
		t.Fatalf("hibernated session should stay running: %s", r.Body)
	}
	if st := ts.must(200, "GET", "/api/sessions/awake", nil).str("session", "sandbox", "status"); st != "live" {
		t.Fatalf("heartbeats did not keep the kernel: %s", st)
	}
	close(stop)
	<-stopped
	start := time.Now()
	out := ts.run("sleepy", "print(arr.sum(), label)")
	if out.str("stdout") != "45 zz\n" {
		t.Fatalf("wake-up lost state: %s", out.Body)
	}
	t.Logf("wake-up run took %s", time.Since(start))
	types := eventTypes(ts.must(200, "GET", "/api/sessions/sleepy/events?limit=200", nil))
	inOrder(t, types, "session_hibernated", "sandbox_created", "checkpoint_restored")

	// Asked for explicitly, and across a server restart.
	if r := ts.must(200, "POST", "/api/sessions/sleepy/hibernate", nil); r.str("session", "sandbox", "status") != "hibernated" {
		t.Fatalf("hibernate: %s", r.Body)
	}
	ts = ts.restart()
	if out := ts.run("sleepy", "print(arr.sum(), label)"); out.str("stdout") != "45 zz\n" {
		t.Fatalf("wake-up after restart lost state: %s", out.Body)
	}
}

// TestCostIsMeasured: CPU burnt in the kernel shows up in budget_consumed and cost_cents.
func TestCostIsMeasured(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "cost", "budget": map[string]any{"cost_cap_cents": 0.001}})
	ts.run("cost", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass")
	r := ts.must(200, "GET", "/api/sessions/cost", nil)
	cpu := r.get("session", "budget_consumed", "cpu_seconds").(float64)
	cents := r.get("session", "budget_consumed", "cost_cents").(float64)
	if cpu < 0.4 || cents <= 0 {
		t.Fatalf("cost not measured: %s", r.Body)
	}
	errCode(t, ts.do("POST", "/api/sessions/cost/run", map[string]any{"code": "1"}), 402, "budget_exceeded")
	if !strings.Contains(strings.Join(eventTypes(ts.must(200, "GET", "/api/sessions/cost/events?limit=100", nil)), ","), "budget_exceeded") {
		t.Fatal("no budget_exceeded event")
	}
}

// TestAgentFlowsSurviveRestart: a server restart between steps of rotation, hibernation and budget
// flows loses nothing committed.
func TestAgentFlowsSurviveRestart(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "ar", "budget": map[string]any{"iteration_limit": 4}, "client_id": "cli"})
	ts.run("ar", "x = 10")
	ts.must(200, "POST", "/api/sessions/ar/rotate", nil)
	ts = ts.restart()
	if r := ts.run("ar", "x += 1\nx"); r.str("result") != "11" {
		t.Fatalf("after restart: %s", r.Body)
	}
	ts.must(200, "POST", "/api/sessions/ar/pause", nil)
	ts = ts.restart()
	r := ts.must(200, "GET", "/api/sessions/ar", nil)
	if r.str("session", "state") != "paused" || r.str("session", "budget_consumed", "iterations") != "2" {
		t.Fatalf("state after restart: %s", r.Body)
	}
	ts.must(200, "POST", "/api/sessions/ar/resume", nil)
	if r := ts.must(200, "POST", "/api/sessions/reattach", map[string]any{"client_id": "cli"}); r.str("session", "id") != "ar" {
		t.Fatalf("reattach: %s", r.Body)
	}
	ts.run("ar", "x += 1")
	ts = ts.restart()
	ts.run("ar", "x += 1")
	errCode(t, ts.do("POST", "/api/sessions/ar/run", map[string]any{"code": "x"}), 402, "budget_exceeded")
	types := eventTypes(ts.must(200, "GET", "/api/sessions/ar/events?limit=200", nil))
	inOrder(t, types, "rotation_completed", "session_paused", "session_resumed", "budget_warning", "budget_exceeded")
}

// TestStopDuringRotationWaits: a stop that arrives while the session is rotating waits for the
// rotation and then completes the session (it is not refused because the state is "rotating").
func TestStopDuringRotationWaits(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "rs"})
	ts.run("rs", "import numpy as np\nbig = np.random.rand(1 << 25)") // 256 MB: rotation takes a while
	rotated := make(chan resp, 1)
	go func() { rotated <- ts.do("POST", "/api/sessions/rs/rotate", nil) }()
	waitFor(t, 10*time.Second, "rotating state", func() bool {
		return ts.must(200, "GET", "/api/sessions/rs", nil).str("session", "state") == "rotating"
	})
	r := ts.must(200, "POST", "/api/sessions/rs/stop", map[string]any{"reason": "done"})
	if r.str("session", "state") != "completed" {
		t.Fatalf("stop: %s", r.Body)
	}
	if rr := <-rotated; rr.Status != 200 {
		t.Fatalf("rotate: %s", rr.Body)
	}
	types := eventTypes(ts.must(200, "GET", "/api/sessions/rs/events?limit=100", nil))
	inOrder(t, types, "rotation_started", "rotation_completed", "session_completed")
}

// TestThousandsOfSessions: a thousand sessions exist, only the ones that ran hold a kernel.
func TestThousandsOfSessions(t *testing.T) {
	ts := startServer(t, "")
	gauge := func() float64 {
		var v float64
		fmt.Sscan(strings.TrimPrefix(lineWithPrefix(string(ts.must(200, "GET", "/metrics", nil).Body), "carryover_kernels_live "), "carryover_kernels_live "), &v)
		return v
	}
	before := gauge() // the metric is process-wide; other tests' servers may have left theirs
	for i := 0; i < 1000; i++ {
		ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": fmt.Sprintf("many-%04d", i)})
	}
	for _, id := range []string{"many-0001", "many-0500", "many-0999"} {
		ts.run(id, "x = 1")
	}
	list := ts.must(200, "GET", "/api/sessions", nil)
	live := 0
	for _, s := range list.get("sessions").([]any) {
		if s.(map[string]any)["sandbox"].(map[string]any)["status"] == "live" {
			live++
		}
	}
	if n := len(list.get("sessions").([]any)); n != 1000 || live != 3 {
		t.Fatalf("%d sessions, %d live", n, live)
	}
	if d := gauge() - before; d != 3 {
		t.Fatalf("kernels attached to sessions grew by %g, want 3", d)
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

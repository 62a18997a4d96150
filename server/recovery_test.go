package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kernelPID asks the session's kernel for its pid.
func kernelPID(t *testing.T, ts *testServer, id string) int {
	t.Helper()
	r := ts.run(id, "import os as _os_probe\n_os_probe.getpid()")
	var pid int
	if _, err := fmtSscan(r.str("result"), &pid); err != nil || pid <= 0 {
		t.Fatalf("pid: %s", r.Body)
	}
	ts.run(id, "del _os_probe")
	return pid
}

// TestKernelDeathMidRun: kill -9 of the kernel during a run answers 502 kernel_died promptly, and
// the session comes back from its last checkpoint.
func TestKernelDeathMidRun(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "die"})
	ts.run("die", "import numpy as np\nkeep = {'a': [1, 2]}\narr = np.ones(5)\nalias = keep")
	pid := kernelPID(t, ts, "die")
	done := make(chan resp, 1)
	go func() {
		done <- ts.do("POST", "/api/sessions/die/run", map[string]any{"code": "lost = 1\nimport time\nprint('started', flush=True)\ntime.sleep(30)"})
	}()
	time.Sleep(700 * time.Millisecond)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var r resp
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("run hung after kernel death")
	}
	errCode(t, r, 502, "kernel_died")
	if !strings.Contains(r.str("result", "stdout"), "started") {
		t.Errorf("partial output not returned: %s", r.Body)
	}
	t.Logf("kernel death answered in %s", time.Since(killed))
	out := ts.run("die", "print(keep, arr.sum(), alias is keep, 'lost' in dir())")
	if out.str("stdout") != "{'a': [1, 2]} 5.0 True False\n" {
		t.Fatalf("not restored: %s", out.Body)
	}
	types := eventTypes(ts.must(200, "GET", "/api/sessions/die/events?limit=100", nil))
	inOrder(t, types, "kernel_died", "sandbox_created", "checkpoint_restored")
}

// TestKernelDeathBetweenRuns: a kernel killed while idle is noticed and replaced eagerly.
func TestKernelDeathBetweenRuns(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "idle-die"})
	ts.run("idle-die", "v = 'still here'")
	pid := kernelPID(t, ts, "idle-die")
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, 15*time.Second, "kernel_died event", func() bool {
		return len(eventTypes(ts.must(200, "GET", "/api/sessions/idle-die/events?event_type=kernel_died", nil))) == 1
	})
	if out := ts.run("idle-die", "v"); out.str("result") != "'still here'" {
		t.Fatalf("%s", out.Body)
	}
}

// TestRunTimeoutKeepsState: a run past timeout_seconds is interrupted, answers 504, and the
// kernel (not restarted) keeps its state.
func TestRunTimeoutKeepsState(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "slowrun"})
	ts.run("slowrun", "before = 41")
	pid := kernelPID(t, ts, "slowrun")
	start := time.Now()
	r := ts.do("POST", "/api/sessions/slowrun/run", map[string]any{"code": "during = 1\nwhile True: pass", "timeout_seconds": 1})
	errCode(t, r, 504, "timeout")
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("timeout took %s", d)
	}
	if r.str("result", "error", "ename") != "KeyboardInterrupt" {
		t.Errorf("partial result: %s", r.Body)
	}
	if out := ts.run("slowrun", "before + during"); out.str("result") != "42" {
		t.Fatalf("state lost: %s", out.Body)
	}
	if kernelPID(t, ts, "slowrun") != pid {
		t.Fatalf("kernel was restarted for an interruptible run")
	}
}

// TestShutdownLetsRunsFinish: SIGTERM-style shutdown waits for the run in flight; after a restart
// its result is there.
func TestShutdownLetsRunsFinish(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "grace"})
	ts.run("grace", "x = 0")
	done := make(chan resp, 1)
	go func() {
		done <- ts.do("POST", "/api/sessions/grace/run", map[string]any{"code": "import time\ntime.sleep(1)\nx = 99"})
	}()
	time.Sleep(300 * time.Millisecond)
	ts = ts.restart()
	if r := <-done; r.Status != 200 {
		t.Fatalf("in-flight run: %s", r.Body)
	}
	if out := ts.run("grace", "x"); out.str("result") != "99" {
		t.Fatalf("after restart: %s", out.Body)
	}
}

// TestShutdownLeavesNoSpool: the kernels' spool (tmpfs by default) is removed when the server stops,
// pooled kernels' directories included.
func TestShutdownLeavesNoSpool(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "sp"})
	ts.run("sp", "x = 1")
	sum := sha256.Sum256([]byte(ts.dir))
	spool := filepath.Join("/dev/shm", "carryover-spool-"+hex.EncodeToString(sum[:6]))
	if !fileExists(spool) {
		t.Skipf("spool is not in /dev/shm here (%s)", spool)
	}
	ts.stop()
	if fileExists(spool) {
		entries, _ := os.ReadDir(spool)
		t.Fatalf("spool left behind with %d entries: %s", len(entries), spool)
	}
}

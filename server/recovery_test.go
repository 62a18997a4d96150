package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// runAnswer is what a run made in another goroutine got.
type runAnswer struct {
	res    *client.RunResult
	status int
	err    error
}

// goRun runs code in a goroutine; its answer arrives on the channel.
func (ts *testServer) goRun(id string, req client.RunRequest) <-chan runAnswer {
	ch := make(chan runAnswer, 1)
	ctx, status := withStatus(ts.ctx())
	go func() {
		res, err := ts.c.Run(ctx, id, req)
		ch <- runAnswer{res, *status, err}
	}()
	return ch
}

// kernelPID asks the session's kernel for its pid.
func kernelPID(t *testing.T, ts *testServer, id string) int {
	t.Helper()
	r := ts.run(id, "import os as _os_probe\n_os_probe.getpid()")
	var pid int
	if _, err := fmtSscan(resultOf(r), &pid); err != nil || pid <= 0 {
		t.Fatalf("pid: %s", dump(r))
	}
	ts.run(id, "del _os_probe")
	return pid
}

// TestKernelDeathMidRun: kill -9 of the kernel during a run answers 502 kernel_died promptly, and
// the session comes back from its last checkpoint.
func TestKernelDeathMidRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "die"})
	ts.run("die", "import numpy as np\nkeep = {'a': [1, 2]}\narr = np.ones(5)\nalias = keep")
	pid := kernelPID(t, ts, "die")
	done := ts.goRun("die", client.RunRequest{Code: "lost = 1\nimport time\nprint('started', flush=True)\ntime.sleep(30)"})
	ts.waitOutput(t, "die", "started")
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var r runAnswer
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("run hung after kernel death")
	}
	errCode(t, r.err, 502, "kernel_died")
	if r.res == nil || !strings.Contains(r.res.Stdout, "started") {
		t.Errorf("partial output not returned: %s", dump(r.res))
	}
	t.Logf("kernel death answered in %s", time.Since(killed))
	out := ts.run("die", "print(keep, arr.sum(), alias is keep, 'lost' in dir())")
	if out.Stdout != "{'a': [1, 2]} 5.0 True False\n" {
		t.Fatalf("not restored: %s", dump(out))
	}
	types := ts.eventTypes("die", 100, "")
	inOrder(t, types, "kernel_died", "sandbox_created", "checkpoint_restored")
}

// TestKernelDeathBetweenRuns: a kernel killed while idle is noticed and replaced eagerly.
func TestKernelDeathBetweenRuns(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "idle-die"})
	ts.run("idle-die", "v = 'still here'")
	pid := kernelPID(t, ts, "idle-die")
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, 15*time.Second, "kernel_died event", func() bool {
		return len(ts.eventTypes("idle-die", 0, "kernel_died")) == 1
	})
	if out := ts.run("idle-die", "v"); resultOf(out) != "'still here'" {
		t.Fatalf("%s", dump(out))
	}
}

// TestRunTimeoutKeepsState: a run past timeout_seconds is interrupted, answers 504, and the
// kernel (not restarted) keeps its state.
func TestRunTimeoutKeepsState(t *testing.T) {
	// Not parallel: its bound on the timeout's wall time needs the CPU the run would get alone.
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "slowrun"})
	ts.run("slowrun", "before = 41")
	pid := kernelPID(t, ts, "slowrun")
	start := time.Now()
	r, err := ts.c.Run(ts.ctx(), "slowrun", client.RunRequest{Code: "during = 1\nwhile True: pass", TimeoutSeconds: client.Seconds(1)})
	errCode(t, err, 504, "timeout")
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("timeout took %s", d)
	}
	if r == nil || r.Error == nil || r.Error.EName != "KeyboardInterrupt" {
		t.Errorf("partial result: %s", dump(r))
	}
	if out := ts.run("slowrun", "before + during"); resultOf(out) != "42" {
		t.Fatalf("state lost: %s", dump(out))
	}
	if kernelPID(t, ts, "slowrun") != pid {
		t.Fatalf("kernel was restarted for an interruptible run")
	}
}

// TestTinyTimeoutInterruptsCell: a deadline that passes before the kernel has even started the cell
// (timeout_seconds 0.001) still interrupts it: the interrupt waits for the cell to start instead of
// reaching an idle kernel, which ignores it (the kernel was then restarted after the grace period).
// The interrupt may land before the cell's first line, so only the state from before is checked.
func TestTinyTimeoutInterruptsCell(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "tiny"})
	ts.run("tiny", "before = 41")
	pid := kernelPID(t, ts, "tiny")
	r, err := ts.c.Run(ts.ctx(), "tiny", client.RunRequest{Code: "import time\ntime.sleep(60)", TimeoutSeconds: client.Seconds(0.001)})
	errCode(t, err, 504, "timeout")
	if e := (*client.Error)(nil); errors.As(err, &e) && e.Details["restarted"] != false {
		t.Errorf("details: %v", e.Details)
	}
	if r == nil || r.Error == nil || r.Error.EName != "KeyboardInterrupt" {
		t.Errorf("partial result: %s", dump(r))
	}
	if kernelPID(t, ts, "tiny") != pid {
		t.Fatalf("kernel was restarted for an interruptible run")
	}
	if out := ts.run("tiny", "before + 1"); resultOf(out) != "42" {
		t.Fatalf("state lost: %s", dump(out))
	}
	// A cell that catches the interrupt ends ok: still a timeout, whose message says the cell
	// ended without an error.
	r, err = ts.c.Run(ts.ctx(), "tiny", client.RunRequest{Code: "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    caught = True",
		TimeoutSeconds: client.Seconds(2)})
	errCode(t, err, 504, "timeout")
	if e := (*client.Error)(nil); !errors.As(err, &e) || !strings.Contains(e.Message, "ended without an error") || r == nil || r.Status != "ok" {
		t.Errorf("a cell that caught the interrupt: %v %s", err, dump(r))
	}
}

// TestShutdownLetsRunsFinish: SIGTERM-style shutdown waits for the run in flight; after a restart
// its result is there.
func TestShutdownLetsRunsFinish(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "grace"})
	ts.run("grace", "x = 0")
	done := ts.goRun("grace", client.RunRequest{Code: "import time\nprint('started', flush=True)\ntime.sleep(1)\nx = 99"})
	ts.waitOutput(t, "grace", "started")
	ts = ts.restart()
	if r := <-done; r.err != nil || r.status != 200 {
		t.Fatalf("in-flight run: %d %v %s", r.status, r.err, dump(r.res))
	}
	if out := ts.run("grace", "x"); resultOf(out) != "99" {
		t.Fatalf("after restart: %s", dump(out))
	}
}

// TestShutdownLeavesNoSpool: the kernels' spool (tmpfs by default) is removed when the server stops,
// pooled kernels' directories included.
func TestShutdownLeavesNoSpool(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "sp"})
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

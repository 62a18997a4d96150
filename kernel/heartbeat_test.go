package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHeartbeatWaitsForAFrozenKernel: a kernel whose processes exist but do not answer (their cgroup
// frozen, which shows them in D as a host's uninterruptible wait does) is not declared dead at the
// third missed beat, which would restore its session and lose the turn in flight: thawed, it answers
// and its turn ends. Frozen past WedgedAfter, it is dead. (A stopped kernel is dead at the third
// missed beat: TestHeartbeatLoss.)
func TestHeartbeatWaitsForAFrozenKernel(t *testing.T) {
	t.Parallel()
	fz := newFreezer(t)
	opts := testOptions(t, "ipc")
	opts.HeartbeatInterval = 200 * time.Millisecond
	opts.WedgedAfter = 5 * time.Second // 25 beats: a loaded host's slow freeze leaves a margin
	k := startKernel(t, opts)
	mustRun(t, k, "import time")
	fz.add(t, groupMembers(k.PID()))
	done := make(chan *runResult, 1)
	go func() { done <- run(t, k, "time.sleep(0.3); 6 * 7", ExecOptions{}) }()
	time.Sleep(100 * time.Millisecond)
	frozenAt := time.Now()
	fz.set(t, "FROZEN")
	fz.waitFrozen(t)
	time.Sleep(time.Until(frozenAt.Add(1500 * time.Millisecond))) // 7 beats unanswered: the old verdict came after 3 (600 ms)
	if err := k.Err(); err != nil {
		t.Fatalf("a frozen kernel (its process in D) was declared dead after 1.5 s: %v", err)
	}
	fz.set(t, "THAWED")
	if r := <-done; r.err != nil || plain(t, r) != "42" {
		t.Fatalf("the turn in flight across the freeze: %+v, %v", r.res, r.err)
	}
	fz.set(t, "FROZEN")
	defer fz.set(t, "THAWED")
	select {
	case <-k.Dead():
		var de *DiedError
		if !errors.As(k.Err(), &de) || !strings.Contains(de.Reason, "while its process still ran") {
			t.Errorf("Err = %v, want a heartbeat loss of a running process", k.Err())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a kernel frozen past WedgedAfter (5 s) was not declared dead")
	}
}

// TestHeartbeatVerdict: the verdict for each kind of silent kernel, on real processes.
func TestHeartbeatVerdict(t *testing.T) {
	t.Parallel()
	p, err := StartProcess(ProcessSpec{Argv: []string{"sleep", "60"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	const iv = 500 * time.Millisecond
	if _, dead := heartbeatVerdict(2, 2*iv, 30*time.Second, p.PID()); dead {
		t.Error("dead after 2 missed beats")
	}
	if _, dead := heartbeatVerdict(3, 3*iv, 30*time.Second, p.PID()); dead {
		t.Error("a sleeping process's kernel dead at 3 missed beats")
	}
	if r, dead := heartbeatVerdict(60, 60*iv, 30*time.Second, p.PID()); !dead || !strings.Contains(r, "no echo for 30s") {
		t.Errorf("60 beats silent of 30 s allowed: %q, %v", r, dead)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !eventually(10*time.Second, func() bool { s, err := readStat(p.PID()); return err == nil && s.state == 'T' }) {
		t.Fatal("sleep not stopped")
	}
	if r, dead := heartbeatVerdict(3, 3*iv, 30*time.Second, p.PID()); !dead || !strings.Contains(r, "stopped or gone") {
		t.Errorf("a stopped process's kernel: %q, %v", r, dead)
	}
	p.Kill()
	if r, dead := heartbeatVerdict(3, 3*iv, 30*time.Second, p.PID()); !dead || !strings.Contains(r, "stopped or gone") {
		t.Errorf("a gone process's kernel: %q, %v", r, dead)
	}
}

// freezer is a cgroup v1 freezer group of the test's own.
type freezer struct{ dir string }

// newFreezer makes one; without the v1 freezer the test is skipped, or fails where make test
// requires the sandbox's host (CARRYOVER_TEST_SANDBOX_REQUIRED: this host has cgroups).
func newFreezer(t *testing.T) *freezer {
	root := "/sys/fs/cgroup/freezer"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		if os.Getenv("CARRYOVER_TEST_SANDBOX_REQUIRED") == "1" {
			t.Fatalf("no cgroup v1 freezer at %s (required: CARRYOVER_TEST_SANDBOX_REQUIRED=1)", root)
		}
		t.Skipf("no cgroup v1 freezer at %s", root)
	}
	dir := filepath.Join(root, "carryover-test-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fz := &freezer{dir: dir}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644)
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(f), 0o644)
		}
		_ = os.Remove(dir)
	})
	return fz
}

func (fz *freezer) add(t *testing.T, pids []int) {
	if len(pids) == 0 {
		t.Fatal("no process to freeze")
	}
	for _, pid := range pids {
		// cgroup.procs moves every thread of the process (tasks would move one: the heartbeat's
		// thread would go on answering)
		if err := os.WriteFile(filepath.Join(fz.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("moving %d into the freezer: %v", pid, err)
		}
	}
}

// waitFrozen waits until every task of the group shows D (frozen).
func (fz *freezer) waitFrozen(t *testing.T) {
	frozen := func() bool {
		b, _ := os.ReadFile(filepath.Join(fz.dir, "tasks"))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if s, err := readStat(pid); err == nil && s.state != 'D' {
				return false
			}
		}
		return len(b) > 0
	}
	if !eventually(10*time.Second, frozen) {
		b, _ := os.ReadFile(filepath.Join(fz.dir, "tasks"))
		t.Fatalf("the group (tasks %q) is not frozen", b)
	}
}

func (fz *freezer) set(t *testing.T, state string) {
	if err := os.WriteFile(filepath.Join(fz.dir, "freezer.state"), []byte(state), 0o644); err != nil {
		t.Fatalf("freezer %s: %v", state, err)
	}
}

// TestHeartbeatPace: an idle kernel is pinged at IdleHeartbeatInterval, one running a turn at
// HeartbeatInterval (the echoes counted as the kernel sends them, from the time of the last one).
func TestHeartbeatPace(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, "ipc")
	opts.HeartbeatInterval, opts.IdleHeartbeatInterval = 50*time.Millisecond, time.Second
	k := startKernel(t, opts)
	inst := k.current()
	echoes := func(d time.Duration) int {
		n, last := 0, inst.lastPong.Load()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if p := inst.lastPong.Load(); p != last {
				n, last = n+1, p
			}
		}
		return n
	}
	time.Sleep(300 * time.Millisecond) // the start's own request answered, the pace idle
	if n := echoes(2500 * time.Millisecond); n < 1 || n > 4 {
		t.Errorf("an idle kernel echoed %d pings in 2.5 s, want 2 or 3 (one a second)", n)
	}
	done := make(chan *runResult, 1)
	go func() { done <- run(t, k, "import time; time.sleep(1.5)", ExecOptions{}) }()
	time.Sleep(200 * time.Millisecond)
	if n := echoes(time.Second); n < 10 {
		t.Errorf("a kernel running a turn echoed %d pings in 1 s, want ~20 (one each 50 ms)", n)
	}
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	// A raw client's request (the Jupyter door's) is not one of ours: the kernel's busy status
	// keeps the working pace while it runs.
	c, _ := json.Marshal(map[string]any{"code": "import time; time.sleep(1.5)", "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	if err := k.SendRaw(context.Background(), "shell", RawMessage{Header: rawHeader("execute_request", "raw-sleep"), Content: c}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the beat the send itself brought forward
	if n := echoes(time.Second); n < 10 {
		t.Errorf("a kernel running a raw client's request echoed %d pings in 1 s, want ~20 (one each 50 ms)", n)
	}
	mustRun(t, k, "1") // after the raw request
	// A busy status that comes after the beat its request's send brought forward (that beat found
	// the kernel idle and set the idle pace; seen on a loaded machine) brings the working pace back.
	time.Sleep(1200 * time.Millisecond) // a beat since the turn: the idle pace
	status := func(state string) *message {
		return &message{Header: header{MsgType: "status"}, Content: []byte(`{"execution_state":"` + state + `"}`)}
	}
	inst.noteStatus(status("busy"))
	if n := echoes(500 * time.Millisecond); n < 5 {
		t.Errorf("after a late busy status the kernel echoed %d pings in 0.5 s, want ~10 (one each 50 ms)", n)
	}
	inst.noteStatus(status("idle"))
}

// TestTurnToAStoppedIdleKernelFailsFast: a kernel stopped (SIGSTOP) while idle would be found dead
// only after three idle beats (here 30 s each); a turn sent to it brings the working pace back, so
// the turn fails within three working beats instead of waiting on the idle ones.
func TestTurnToAStoppedIdleKernelFailsFast(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, "ipc")
	opts.HeartbeatInterval, opts.IdleHeartbeatInterval = 200*time.Millisecond, 30*time.Second
	k := startKernel(t, opts)
	mustRun(t, k, "1")
	if err := syscall.Kill(-k.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-k.PID(), syscall.SIGCONT)
	if !eventually(10*time.Second, func() bool { s, err := readStat(k.PID()); return err == nil && s.state == 'T' }) {
		t.Fatal("kernel not stopped")
	}
	time.Sleep(3 * opts.HeartbeatInterval) // a beat after the turn: the pace is the idle one now
	sent := time.Now()
	done := make(chan *runResult, 1)
	go func() { done <- run(t, k, "2", ExecOptions{}) }()
	select {
	case r := <-done:
		var de *DiedError
		if !errors.As(r.err, &de) || !strings.Contains(de.Reason, "stopped or gone") {
			t.Fatalf("the turn to a stopped kernel: %+v, %v", r.res, r.err)
		}
		t.Logf("the turn failed %s after it was sent", time.Since(sent).Round(time.Millisecond))
	case <-time.After(20 * time.Second): // three idle beats would be 90 s
		t.Fatal("a turn sent to a stopped idle kernel still waits after 20 s")
	}
}

package kernel

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitBusy runs code in the background and returns once the kernel reported busy for it.
func waitBusy(t *testing.T, k *Kernel, code string) <-chan *runResult {
	t.Helper()
	busy := make(chan struct{})
	done := make(chan *runResult, 1)
	var once sync.Once
	go func() {
		done <- run(t, k, code, ExecOptions{OnStatus: func(s string) {
			if s == "busy" {
				once.Do(func() { close(busy) })
			}
		}})
	}()
	select {
	case <-busy:
	case r := <-done:
		t.Fatalf("execute ended before busy: %v %+v", r.err, r.res)
	case <-time.After(30 * time.Second):
		t.Fatal("no busy status")
	}
	time.Sleep(100 * time.Millisecond) // let the kernel enter the loop
	return done
}

// startKernelInterruptMode starts a kernel whose kernelspec says interrupt_mode mode.
func startKernelInterruptMode(t *testing.T, mode string) *Kernel {
	t.Helper()
	opts := testOptions(t, "ipc")
	spec, err := FindSpec("python3", "")
	if err != nil {
		t.Fatal(err)
	}
	spec.InterruptMode = mode
	opts.Spec = spec
	return startKernel(t, opts)
}

func TestInterrupt(t *testing.T) {
	for _, mode := range []string{"signal", "message"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			k := startKernelInterruptMode(t, mode)
			done := waitBusy(t, k, "while True: pass")
			if err := k.Interrupt(context.Background()); err != nil {
				t.Fatal(err)
			}
			var r *runResult
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("interrupt did not stop `while True: pass`")
			}
			if r.err != nil || r.res.Status != "error" || r.res.EName != "KeyboardInterrupt" {
				t.Errorf("interrupted execute: %v %+v", r.err, r.res)
			}
			if e := r.find("error"); e == nil || e.EName != "KeyboardInterrupt" {
				t.Errorf("no KeyboardInterrupt error output: %+v", r.outputs)
			}
			if got := plain(t, mustRun(t, k, "1+1")); got != "2" {
				t.Errorf("after interrupt 1+1 = %q", got)
			}
			if k.Err() != nil {
				t.Errorf("kernel dead after interrupt: %v", k.Err())
			}
		})
	}
}

// TestInterruptAtStart: an interrupt sent the moment OnStart says the cell started (no wait) stops
// it, in both modes: ipykernel arms its SIGINT handler before it sends execute_input.
func TestInterruptAtStart(t *testing.T) {
	for _, mode := range []string{"signal", "message"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			k := startKernelInterruptMode(t, mode)
			done := make(chan *runResult, 1)
			go func() {
				done <- run(t, k, "import time\ntime.sleep(60)", ExecOptions{OnStart: func() {
					_ = k.Interrupt(context.Background())
				}})
			}()
			select {
			case r := <-done:
				if r.err != nil || r.res.EName != "KeyboardInterrupt" {
					t.Errorf("interrupted at start: %v %+v", r.err, r.res)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("an interrupt sent at OnStart did not stop the cell")
			}
			if got := plain(t, mustRun(t, k, "1+1")); got != "2" {
				t.Errorf("after interrupt 1+1 = %q", got)
			}
		})
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	k := startKernel(t, testOptions(t, "tcp"))
	oldPID, oldDead, oldConn := k.PID(), k.Dead(), k.Connection()
	mustRun(t, k, "state = 'kept?'")
	// An execute in flight when the restart happens fails with ErrDied.
	done := waitBusy(t, k, "import time; time.sleep(30)")
	if err := k.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if !errors.Is(r.err, ErrDied) {
			t.Errorf("execute across restart: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("execute in flight did not return after restart")
	}
	select {
	case <-oldDead:
	default:
		t.Error("old Dead channel not closed by restart")
	}
	if k.PID() == oldPID || processExists(oldPID) {
		t.Errorf("pid %d -> %d, old alive: %v", oldPID, k.PID(), processExists(oldPID))
	}
	if c := k.Connection(); c.Key == oldConn.Key || c.ShellPort == oldConn.ShellPort && c.IOPubPort == oldConn.IOPubPort {
		t.Errorf("restart reused the connection: %+v", c)
	}
	if k.Err() != nil {
		t.Errorf("Err after restart: %v", k.Err())
	}
	r := run(t, k, "state", ExecOptions{})
	if r.err != nil || r.res.EName != "NameError" {
		t.Errorf("state survived the restart: %v %+v", r.err, r.res)
	}
	if got := plain(t, mustRun(t, k, "1+1")); got != "2" {
		t.Errorf("after restart 1+1 = %q", got)
	}
}

// TestKillDetected: a kernel killed with SIGKILL mid-execute makes Execute return ErrDied within 2 s.
func TestKillDetected(t *testing.T) {
	t.Parallel()
	k := startKernel(t, testOptions(t, "ipc"))
	pid := k.PID()
	done := waitBusy(t, k, "import time; time.sleep(60)")
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		took := time.Since(killed)
		if !errors.Is(r.err, ErrDied) {
			t.Fatalf("execute returned %v, want ErrDied", r.err)
		}
		if took > 2*time.Second {
			t.Errorf("death noticed after %v, want < 2s", took)
		}
		var de *DiedError
		if !errors.As(r.err, &de) || de.PID != pid || de.Signal != "killed" {
			t.Errorf("died error = %#v", de)
		}
		t.Logf("kill -9 detected after %v", took)
	case <-time.After(2 * time.Second):
		t.Fatal("Execute did not return within 2 s of kill -9")
	}
	select {
	case <-k.Dead():
	default:
		t.Error("Dead() not closed")
	}
	if !errors.Is(k.Err(), ErrDied) {
		t.Errorf("Err() = %v", k.Err())
	}
	// Later calls fail fast too.
	if _, err := k.Execute(context.Background(), "1", ExecOptions{}); !errors.Is(err, ErrDied) {
		t.Errorf("execute on a dead kernel: %v", err)
	}
	if _, err := k.Complete(context.Background(), "pri", 3); !errors.Is(err, ErrDied) {
		t.Errorf("complete on a dead kernel: %v", err)
	}
	if _, err := k.Stats(); err == nil {
		t.Error("stats of a dead kernel")
	}

	// A dead kernel restarts; and a crash right after printing keeps its last words.
	if err := k.Restart(context.Background()); err != nil {
		t.Fatalf("restart after death: %v", err)
	}
	// (The sleep lets libzmq's I/O thread write the message: os._exit can kill it before that, and
	// then nothing was sent. What was sent must arrive, even though the exit notice comes first.)
	r := run(t, k, "print('last words', flush=True)\nimport os, time; time.sleep(0.1); os._exit(3)", ExecOptions{})
	var de *DiedError
	if !errors.As(r.err, &de) || de.ExitCode != 3 || de.Reason != "process exited" {
		t.Errorf("os._exit(3): %v", r.err)
	}
	if r.text("") != "last words\n" {
		t.Errorf("output before the crash: %q", r.text(""))
	}
}

// TestHeartbeatLoss: a stopped (SIGSTOP) kernel still has a process but no heartbeat; idle, it is
// dead after three of its idle beats.
func TestHeartbeatLoss(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, "ipc")
	opts.HeartbeatInterval = 200 * time.Millisecond
	opts.IdleHeartbeatInterval = time.Second
	k := startKernel(t, opts)
	time.Sleep(time.Second) // healthy beats first
	if err := k.Err(); err != nil {
		t.Fatalf("healthy kernel declared dead: %v", err)
	}
	if err := syscall.Kill(-k.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-k.PID(), syscall.SIGCONT)
	select {
	case <-k.Dead():
		var de *DiedError
		if !errors.As(k.Err(), &de) || !strings.Contains(de.Reason, "heartbeat") {
			t.Errorf("Err = %v", k.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped kernel was not declared dead")
	}
	syscall.Kill(-k.PID(), syscall.SIGCONT)
}

func TestStartFailure(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, "ipc")
	opts.Spec = &Spec{Name: "broken", Argv: []string{"/usr/bin/python3", "-c",
		"import sys; print('boom: no kernel here', file=sys.stderr); sys.exit(3)"}}
	start := time.Now()
	_, err := Start(context.Background(), opts)
	if err == nil {
		t.Fatal("a kernel that exits at once started")
	}
	if !strings.Contains(err.Error(), "boom: no kernel here") || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("error lacks the log tail or exit code: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("failure took %v", time.Since(start))
	}
	entries, _ := os.ReadDir(opts.RuntimeDir)
	if len(entries) != 0 {
		t.Errorf("runtime dir left behind: %v", entries)
	}
}

func TestStartTimeout(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, "tcp")
	opts.StartupTimeout = 500 * time.Millisecond
	opts.Spec = &Spec{Name: "sleeper", Argv: []string{"/bin/sh", "-c", "echo started-but-silent; sleep 30 & sleep 30"}}
	token := randomHex(8)
	opts.Env["CARRYOVER_TEST_TOKEN"] = token
	_, err := Start(context.Background(), opts)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "started-but-silent") {
		t.Fatalf("start of a silent kernel: %v", err)
	}
	// Both sleeps (the whole process group) are gone.
	if !eventually(5*time.Second, func() bool { return len(sleepers(token)) == 0 }) {
		t.Errorf("process group not killed: %v", sleepers(token))
	}
}

// sleepers finds the `sleep 30` processes started with token in their environment.
func sleepers(token string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == "sleep\x0030\x00" {
			if st, err := readStat(atoiOr(e.Name())); err == nil && st.pgrp != 0 {
				if c, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && strings.Contains(string(c), "CARRYOVER_TEST_TOKEN="+token) {
					out = append(out, atoiOr(e.Name()))
				}
			}
		}
	}
	return out
}

func atoiOr(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestManyKernels starts and stops 20 kernels (two restarted, one killed): no process, process group
// or goroutine may outlive them.
// Not parallel: the goroutine count must only see this test.
func TestManyKernels(t *testing.T) {
	if testing.Short() {
		t.Skip("20 kernels")
	}
	runtime.GC()
	baseline := runtime.NumGoroutine()
	const n = 20
	ks := make([]*Kernel, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 5) // 2 cores: more at once only slows each start down
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			transport := []string{"ipc", "tcp"}[i%2]
			ks[i], errs[i] = Start(context.Background(), testOptions(t, transport))
		}()
	}
	wg.Wait()
	var pids []int
	for i, k := range ks {
		if errs[i] != nil {
			t.Errorf("kernel %d: %v", i, errs[i])
			continue
		}
		// A child in the kernel's group must go with it.
		mustRun(t, k, "import subprocess; _p = subprocess.Popen(['sleep', '30'])")
		switch i {
		case 0, 1: // the restart path tears down differently
			pids = append(pids, k.PID())
			if err := k.Restart(context.Background()); err != nil {
				t.Errorf("restart: %v", err)
			}
			mustRun(t, k, "import subprocess; _p = subprocess.Popen(['sleep', '30'])")
		case 2: // and so does a death
			pids = append(pids, k.PID())
			syscall.Kill(k.PID(), syscall.SIGKILL)
			<-k.Dead()
		}
		pids = append(pids, k.PID())
	}
	for _, k := range ks {
		if k == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			if _, err := os.Stat(k.RuntimeDir()); !os.IsNotExist(err) {
				t.Errorf("runtime dir %s not removed: %v", k.RuntimeDir(), err)
			}
		}()
	}
	wg.Wait()
	for _, pid := range pids {
		if processExists(pid) {
			t.Errorf("kernel pid %d still running", pid)
		}
		if m := groupMembers(pid); len(m) > 0 {
			t.Errorf("process group %d still has %v", pid, m)
		}
	}
	ok := eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= baseline+2 })
	if !ok {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after\n%s", baseline, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
	t.Logf("goroutines: %d before, %d after", baseline, runtime.NumGoroutine())
}

// TestPoolWarmsOnlyPooledKernels: a kernel started because the pool was empty is handed out right
// after onStart; onWarm (work that pays off only later) is not run on it.
func TestPoolWarmsOnlyPooledKernels(t *testing.T) {
	t.Parallel()
	warmed := make(chan string, 1)
	p := NewPool(0, testOptions(t, "ipc"), nil, func(ctx context.Context, k *Kernel) error {
		warmed <- k.ID()
		return nil
	})
	ctx := context.Background()
	defer p.Close(ctx)
	k, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(ctx)
	select {
	case id := <-warmed:
		t.Errorf("onWarm ran on kernel %s, started for a Get on an empty pool", id)
	default:
	}
}

func TestPool(t *testing.T) {
	t.Parallel()
	var started sync.Map
	p := NewPool(2, testOptions(t, "ipc"), func(ctx context.Context, k *Kernel) error {
		started.Store(k.ID(), true)
		_, err := k.Execute(ctx, "warmed = 'yes'", ExecOptions{Silent: true})
		return err
	}, func(ctx context.Context, k *Kernel) error {
		_, err := k.Execute(ctx, "pooled = warmed", ExecOptions{Silent: true}) // after onStart
		return err
	})
	if !eventually(60*time.Second, func() bool { return p.Idle() == 2 }) {
		t.Fatalf("pool did not fill: %d idle", p.Idle())
	}
	ctx := context.Background()
	k, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Shutdown(ctx)
	if _, ok := started.Load(k.ID()); !ok {
		t.Error("onStart did not run on the handed-out kernel")
	}
	if got := plain(t, mustRun(t, k, "warmed, pooled")); got != "('yes', 'yes')" {
		t.Errorf("warmed, pooled = %q", got)
	}
	if !eventually(60*time.Second, func() bool { return p.Idle() == 2 }) {
		t.Errorf("pool did not refill: %d idle", p.Idle())
	}
	// A pooled kernel that died is not handed out.
	p.mu.Lock()
	victim := p.idle[0]
	p.mu.Unlock()
	syscall.Kill(victim.PID(), syscall.SIGKILL)
	<-victim.Dead()
	k2, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Shutdown(ctx)
	if k2 == victim || k2.Err() != nil {
		t.Error("a dead kernel was handed out")
	}
	p.mu.Lock()
	var idlePIDs []int
	for _, ik := range p.idle {
		idlePIDs = append(idlePIDs, ik.PID())
	}
	p.mu.Unlock()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range idlePIDs {
		if processExists(pid) {
			t.Errorf("pooled kernel %d survived Close", pid)
		}
	}
	if _, err := p.Get(ctx); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Get after Close: %v", err)
	}
}

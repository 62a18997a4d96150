package sandbox

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

// newProvisioner returns a Provisioner on a live Manager, with a spool dir beside its state dir.
func newProvisioner(t *testing.T) *Provisioner {
	t.Helper()
	m := newManager(t)
	spool := filepath.Join(filepath.Dir(m.cfg.StateDir), "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	return NewProvisioner(m, ProvisionerConfig{Defaults: Limits{Pids: 512}, MaxCPUs: 2, MaxMemory: 2 << 30, SpoolDir: spool})
}

// startBoxedKernel starts a kernel through p; the test shuts it down.
func startBoxedKernel(t *testing.T, p *Provisioner) *kernel.Kernel {
	t.Helper()
	return startBoxedKernelIn(t, p, runtimeBase(t))
}

// runtimeBase is a runtime base for the test's kernels, removed when the test ends.
func runtimeBase(t *testing.T) string {
	t.Helper()
	rt, err := os.MkdirTemp("", "cos")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	return rt
}

// startBoxedKernelIn is startBoxedKernel with its runtime dir made in rt.
func startBoxedKernelIn(t *testing.T, p *Provisioner, rt string) *kernel.Kernel {
	t.Helper()
	return startBoxedKernelWith(t, p, rt, nil)
}

// startBoxedKernelWith is startBoxedKernelIn with tweak applied to the kernel's options.
func startBoxedKernelWith(t *testing.T, p *Provisioner, rt string, tweak func(*kernel.Options)) *kernel.Kernel {
	t.Helper()
	spec, err := kernel.FindSpec("python", "/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := kernel.Options{Spec: spec, Provisioner: p, RuntimeDir: rt, StartupTimeout: 60 * time.Second}
	if tweak != nil {
		tweak(&opts)
	}
	k, err := kernel.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	return k
}

// TestProvisionerKernel launches a real kernel in a box, attaches a workspace to it while it runs,
// interrupts it by message, and checks that Shutdown leaves no box, mount, process or spool behind.
func TestProvisionerKernel(t *testing.T) {
	p := newProvisioner(t)
	k := startBoxedKernel(t, p)
	ctx := context.Background()
	proc := k.Process()
	if !proc.InterruptByMessage() {
		t.Error("a sandboxed kernel must be interrupted by message")
	}
	box := proc.(*boxKernel).box
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := proc.AttachWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	if got := proc.KernelPath(filepath.Join(ws, "sub", "dir")); got != "/workspace/sub/dir" {
		t.Errorf("KernelPath = %q", got)
	}
	got, err := k.Eval(ctx, "import os", "(open('/workspace/hello.txt').read(), os.getuid(), os.environ.get('JPY_PARENT_PID'), os.environ['HOME'])")
	if err != nil {
		t.Fatal(err)
	}
	if want := "('from the host', " + strconv.Itoa(box.UID()) + ", None, '/tmp')"; got != want {
		t.Errorf("kernel sees %s, want %s", got, want)
	}

	host, inside := proc.Spool()
	if inside != MountTarget("spool") || filepath.Dir(host) != p.cfg.SpoolDir {
		t.Errorf("spool %q -> %q", host, inside)
	}
	if _, err := k.Eval(ctx, "open('"+inside+"/probe', 'w').write('x')", ""); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "probe")); err != nil || string(b) != "x" {
		t.Errorf("spool file from the kernel: %q, %v", b, err)
	}

	before, err := proc.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Eval(ctx, "sum(i*i for i in range(10_000_000))", ""); err != nil {
		t.Fatal(err)
	}
	// The kernel itself is counted, not only bubblewrap outside the box.
	st, err := proc.Stats()
	if err != nil || st.CPUSeconds-before.CPUSeconds < 0.2 || st.RSSBytes < 20<<20 {
		t.Errorf("stats %+v -> %+v, %v", before, st, err)
	}
	// Read from the box's cgroup (when it has one), the figures are those of a pass over /proc.
	if box.cg != nil {
		if !slices.Contains(box.cg.pids(), proc.(*boxKernel).PID()) {
			t.Error("the wrapper is not in the box's cgroup: Stats falls back to a pass over /proc")
		}
		all, err := kernel.ScanProcs()
		if err != nil {
			t.Fatal(err)
		}
		whole, err := all.Group(proc.(*boxKernel).PID())
		for _, c := range all.Children(proc.(*boxKernel).PID()) {
			if in, err := all.Group(c); err == nil {
				whole.CPUSeconds += in.CPUSeconds
				whole.RSSBytes += in.RSSBytes
			}
		}
		if err != nil || math.Abs(whole.CPUSeconds-st.CPUSeconds) > 0.05 || abs64(whole.RSSBytes-st.RSSBytes) > 4<<20 {
			t.Errorf("stats from the cgroup %+v, from /proc %+v (%v)", st, whole, err)
		}
	}

	var le *kernel.LimitError
	if err := proc.SetLimits(kernel.Limits{CPUs: "4"}); !errors.As(err, &le) || le.Field != "cpus" {
		t.Errorf("over the ceiling: %v", err)
	}
	if err := proc.SetLimits(kernel.Limits{CPUs: "1", Memory: "1Gi"}); err != nil {
		t.Error(err)
	}
	if l := box.Limits(); l.CPUs != 1 || l.MemoryBytes != 1<<30 || l.Pids != 512 {
		t.Errorf("limits %+v", l)
	}

	done := make(chan *kernel.ExecResult, 1)
	go func() {
		res, _ := k.Execute(ctx, "import time; time.sleep(60)", kernel.ExecOptions{})
		done <- res
	}()
	time.Sleep(time.Second)
	if err := k.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || res.EName != "KeyboardInterrupt" {
			t.Errorf("interrupted execute: %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the interrupt did not reach the kernel")
	}
	if _, err := k.Eval(ctx, "x = 1", ""); err != nil {
		t.Errorf("kernel after the interrupt: %v", err)
	}

	uid := box.UID()
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	assertReleased(t, p, box, uid)
	if _, err := os.Stat(host); !os.IsNotExist(err) {
		t.Errorf("spool %s left behind: %v", host, err)
	}
}

// assertReleased checks that a box left nothing: no mounts, no box dir, no processes of its uid.
func assertReleased(t *testing.T, p *Provisioner, box *Box, uid int) {
	t.Helper()
	if mounts := mountsUnder(box.dir); len(mounts) != 0 {
		t.Errorf("mounts left: %v", mounts)
	}
	if _, err := os.Stat(box.dir); !os.IsNotExist(err) {
		t.Errorf("box dir %s left: %v", box.dir, err)
	}
	p.m.mu.Lock()
	_, alive := p.m.boxes[box.Name()]
	p.m.mu.Unlock()
	if alive {
		t.Errorf("box %s still registered", box.Name())
	}
	if box.ownUID {
		if pids := pidsOfUID(uid); len(pids) != 0 {
			t.Errorf("processes of uid %d left: %v", uid, pids)
		}
	}
}

// TestProvisionerCommand runs a shell command through the provisioner in a box of its own with the
// session's workspace, and checks the limits' validation and the release of the box.
func TestProvisionerCommand(t *testing.T) {
	p := newProvisioner(t)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hi"), 0o644)
	var out bytes.Buffer
	proc, err := p.Command(context.Background(), kernel.CommandSpec{
		Argv: []string{"/bin/sh", "-c", `pwd; cat /workspace/hello.txt; echo; echo "$HOME $GREETING"; id -u; exit 7`},
		Dir:  filepath.Join(ws, "sub"), Workspace: ws, Env: map[string]string{"GREETING": "hello"},
		Limits: kernel.Limits{Memory: "256Mi"}, Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	box := proc.(*commandProcess).box
	uid := box.UID()
	if l := box.Limits(); l.MemoryBytes != 256<<20 || l.Pids != 512 {
		t.Errorf("limits %+v", l)
	}
	select {
	case <-proc.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("command did not finish")
	}
	if st := proc.ExitStatus(); st.Code != 7 {
		t.Errorf("exit status %+v, want 7", st)
	}
	want := "/workspace/sub\nhi\n/tmp hello\n" + strconv.Itoa(uid) + "\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if err := proc.Cleanup(); err != nil {
		t.Error(err)
	}
	assertReleased(t, p, box, uid)

	var le *kernel.LimitError
	_, err = p.Command(context.Background(), kernel.CommandSpec{Argv: []string{"true"}, Workspace: ws, Dir: ws, Limits: kernel.Limits{Memory: "lots"}})
	if !errors.As(err, &le) || le.Field != "memory" || !strings.Contains(le.Message, "lots") {
		t.Errorf("bad memory: %v", err)
	}
}

// TestProvisionerRestart: a restarted kernel comes back in the same box, with its workspace and
// limits, and the old process is gone.
func TestProvisionerRestart(t *testing.T) {
	p := newProvisioner(t)
	k := startBoxedKernel(t, p)
	ctx := context.Background()
	old := k.Process().(*boxKernel)
	ws := t.TempDir()
	_ = os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("kept"), 0o644)
	if err := old.AttachWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	if err := old.SetLimits(kernel.Limits{Memory: "1Gi"}); err != nil {
		t.Fatal(err)
	}
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cur := k.Process().(*boxKernel)
	if cur == old || cur.kb != old.kb {
		t.Fatalf("restart: process %p -> %p, box %p -> %p", old, cur, old.kb, cur.kb)
	}
	select {
	case <-old.Exited():
	default:
		t.Error("the old process is still running")
	}
	if got, err := k.Eval(ctx, "", "open('/workspace/kept.txt').read()"); err != nil || got != "'kept'" {
		t.Errorf("workspace after restart: %q, %v", got, err)
	}
	if l := cur.box.Limits(); l.MemoryBytes != 1<<30 {
		t.Errorf("limits after restart: %+v", l)
	}
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

package template

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

const leakCanary = "CARRYOVER_TEST_LEAK_CANARY"

func TestMain(m *testing.M) {
	os.Setenv(leakCanary, "leaked")
	os.Exit(m.Run())
}

// newProvisioner is a template provisioner for the default python3 kernelspec, closed at the end.
func newProvisioner(t *testing.T, preImport ...string) (*Provisioner, *kernel.Spec) {
	return newPreloaded(t, preloadProbe, preImport...)
}

// preloadProbe is the tests' Config.Preload: a module only the template's preload makes.
const preloadProbe = "import sys, types\nsys.modules['carryover_preload_probe'] = types.ModuleType('carryover_preload_probe')\n"

// newPreloaded is newProvisioner with preload as the template's Config.Preload.
func newPreloaded(t *testing.T, preload string, preImport ...string) (*Provisioner, *kernel.Spec) {
	t.Helper()
	spec, err := kernel.FindSpec("python3", "")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := New(Config{Python: spec.Argv[0], PreImport: preImport, Preload: preload, Dir: t.TempDir(),
		Local: &kernel.LocalProvisioner{SpoolRoot: t.TempDir()}, Logger: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close() })
	return tp, spec
}

// start starts a kernel through tp, shut down at the end.
func start(t *testing.T, tp *Provisioner, spec *kernel.Spec, env map[string]string) *kernel.Kernel {
	return startOpts(t, tp, kernel.Options{Spec: spec, Env: env})
}

// startOpts is start with more options.
func startOpts(t *testing.T, tp *Provisioner, opts kernel.Options) *kernel.Kernel {
	t.Helper()
	dir, err := os.MkdirTemp("", "cotpl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts.RuntimeDir, opts.Provisioner, opts.StartupTimeout = dir, tp, 60*time.Second
	k, err := kernel.Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
	return k
}

// facts is what a kernel says about itself.
type facts struct {
	PPID      int    `json:"ppid"`
	PGID      int    `json:"pgid"`
	PID       int    `json:"pid"`
	Preloaded bool   `json:"preloaded"`
	Probe     bool   `json:"probe"` // the template's preload ran (preloadProbe)
	NP        string `json:"np"`
	Random    string `json:"random"`
	Leak      string `json:"leak"`
	Env       string `json:"env"`
	Threads   int    `json:"threads"`
}

const factsCode = `import os as _o, sys as _s, json as _j, random as _r, threading as _t
_pre = 'numpy' in _s.modules
import numpy as _np
_facts = _j.dumps({'ppid': _o.getppid(), 'pgid': _o.getpgrp(), 'pid': _o.getpid(), 'preloaded': _pre,
  'probe': 'carryover_preload_probe' in _s.modules,
  'np': str(_np.random.randint(2**62)), 'random': str(_r.getrandbits(62)),
  'leak': _o.environ.get('` + leakCanary + `', ''), 'env': _o.environ.get('CARRYOVER_TEST_ENV', ''),
  'threads': _t.active_count()})`

func factsOf(t *testing.T, k *kernel.Kernel) facts {
	t.Helper()
	var f facts
	evalJSON(t, k, factsCode, "_facts", &f)
	return f
}

// evalJSON runs code in k and decodes into v the JSON text that expr then is (a str).
func evalJSON(t *testing.T, k *kernel.Kernel, code, expr string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := k.Eval(ctx, code, expr)
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	if err := json.Unmarshal([]byte(strings.Trim(out, "'")), v); err != nil {
		t.Fatalf("%s = %q: %v", expr, out, err)
	}
}

// Two kernels forked from one template: each is the template's child, leads its own process group,
// finds numpy already imported and what the template's preload made, has RNG streams of its own (numpy's legacy global one and random's),
// its launch's env and nothing of the server's; SIGKILL to one ends it with the status reported.
func TestForkedKernelsAreTheirOwn(t *testing.T) {
	t.Parallel()
	tp, spec := newProvisioner(t, "numpy")
	// The server's MPLBACKEND is the template's: still forkable.
	env := map[string]string{"CARRYOVER_TEST_ENV": "passed", "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
	ks := make([]*kernel.Kernel, 2)
	var wg sync.WaitGroup
	for i := range ks {
		wg.Add(1)
		go func() { defer wg.Done(); ks[i] = start(t, tp, spec, env) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	tpid := tp.Stats().PID
	a, b := factsOf(t, ks[0]), factsOf(t, ks[1])
	for _, f := range []facts{a, b} {
		if f.PPID != tpid || f.PGID != f.PID || !f.Preloaded || !f.Probe || f.Leak != "" || f.Env != "passed" {
			t.Errorf("forked kernel %+v: want ppid %d (the template), its own group, numpy and the probe preloaded, env passed, no leak", f, tpid)
		}
	}
	for _, k := range ks { // ps and whoever looks for kernels by their command line see a kernel's
		if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k.PID())); !strings.Contains(string(cmd), "ipykernel_launcher\x00-f\x00"+k.RuntimeDir()) {
			t.Errorf("forked kernel's cmdline %q, want its kernel argv", cmd)
		}
	}
	if a.NP == b.NP || a.Random == b.Random {
		t.Errorf("sibling kernels share an RNG stream: %+v %+v", a, b)
	}
	if st := tp.Stats(); st.Forks != 2 || st.Cold != 0 {
		t.Errorf("stats %+v, want 2 forks", st)
	}
	p := ks[0].Process()
	p.Kill()
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("a killed forked kernel was never seen exiting")
	}
	if st := p.ExitStatus(); st.Signal != syscall.SIGKILL {
		t.Errorf("exit status %+v, want SIGKILL", st)
	}
	select {
	case <-ks[0].Dead():
	case <-time.After(10 * time.Second):
		t.Fatal("the kernel of a killed process is not dead")
	}
}

// kill -9 of the template: its kernels live on, a new template starts, and the next kernel is its.
func TestTemplateKilled(t *testing.T) {
	t.Parallel()
	tp, spec := newProvisioner(t)
	k := start(t, tp, spec, nil)
	old := tp.Stats().PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for tp.Stats().PID == old || tp.Stats().PID == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no new template after kill -9 of the old one")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if f := factsOf(t, k); f.PID != k.PID() {
		t.Errorf("the kernel of a killed template answers %+v, want pid %d", f, k.PID())
	}
	k2 := start(t, tp, spec, nil)
	if f := factsOf(t, k2); f.PPID != tp.Stats().PID {
		t.Errorf("new kernel's parent %d, want the new template %d", f.PPID, tp.Stats().PID)
	}
	if st := tp.Stats(); st.Restarts != 1 || st.Forks != 2 {
		t.Errorf("stats %+v, want 1 restart, 2 forks", st)
	}
}

// A kernel whose env sets what pre-imported libraries read at import, or asked Fresh (a session's
// env will set such a variable), starts cold: the server's child.
func TestImportTimeEnvStartsCold(t *testing.T) {
	t.Parallel()
	tp, spec := newProvisioner(t, "numpy")
	ks := []*kernel.Kernel{
		start(t, tp, spec, map[string]string{"OMP_NUM_THREADS": "1", "MPLBACKEND": "module://matplotlib_inline.backend_inline"}),
		startOpts(t, tp, kernel.Options{Spec: spec, Fresh: true}),
	}
	for _, k := range ks {
		if f := factsOf(t, k); f.PPID != os.Getpid() || f.Preloaded {
			t.Errorf("kernel %+v: want a cold start (parent %d, numpy not preloaded)", f, os.Getpid())
		}
	}
	if st := tp.Stats(); st.Cold != 2 || st.Forks != 0 {
		t.Errorf("stats %+v, want 2 cold", st)
	}
}

// TestImportEnvDecidesForkable: a launch whose env sets a variable read at import is forkable only
// when it sets it as the template imported with (the server's kernels', or Config.ImportEnv).
func TestImportEnvDecidesForkable(t *testing.T) {
	argv := []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "c.json"}
	agg := map[string]string{"MPLBACKEND": "Agg"}
	inline := map[string]string{"MPLBACKEND": templateEnv["MPLBACKEND"]}
	for _, tc := range []struct {
		importEnv, env map[string]string
		want           bool
	}{
		{nil, nil, true},
		{nil, inline, true},
		{nil, agg, false},
		{agg, agg, true},
		{agg, inline, false},
		{agg, map[string]string{"OMP_NUM_THREADS": "1"}, false},
	} {
		tp := &Provisioner{cfg: Config{Python: argv[0], ImportEnv: tc.importEnv}}
		if got := tp.Forkable(kernel.LaunchSpec{Argv: argv, Env: tc.env}); got != tc.want {
			t.Errorf("import env %v, launch env %v: forkable %v, want %v", tc.importEnv, tc.env, got, tc.want)
		}
	}
}

// TestFailingPreloadStillForks: a preload that raises is logged in the template's log, and the
// template still warms and forks kernels (each then loads the agent itself, as a cold one does).
func TestFailingPreloadStillForks(t *testing.T) {
	t.Parallel()
	tp, spec := newPreloaded(t, "raise RuntimeError('carryover preload probe failed')\n")
	k := start(t, tp, spec, nil)
	if f := factsOf(t, k); f.PPID != tp.Stats().PID || f.Probe {
		t.Errorf("kernel %+v: want forked from the template %d", f, tp.Stats().PID)
	}
	if st := tp.Stats(); st.Forks != 1 || st.Cold != 0 {
		t.Errorf("stats %+v, want 1 fork", st)
	}
	log, _ := os.ReadFile(filepath.Join(tp.sup.dir, "template.log"))
	if !strings.Contains(string(log), "carryover preload probe failed") {
		t.Errorf("the template's log lacks the preload's error:\n%s", log)
	}
}

// A forked kernel ends as a cold one does: its atexit handlers (the user's among them) run when it
// is shut down. The child leaves with os._exit, which skips them unless the launch runs them.
func TestForkedKernelRunsAtexitOnShutdown(t *testing.T) {
	t.Parallel()
	tp, spec := newProvisioner(t)
	k := start(t, tp, spec, nil)
	if tp.Stats().Forks != 1 {
		t.Fatalf("stats %+v: want the kernel forked", tp.Stats())
	}
	path := filepath.Join(t.TempDir(), "bye")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := k.Eval(ctx, "import atexit\natexit.register(lambda: open("+strconv.Quote(path)+", 'w').write('bye'))", "1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "bye" {
		t.Fatalf("the kernel's atexit handler did not run at shutdown: %q, %v", b, err)
	}
}

package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/sandboxtest"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/kernel/template"
)

// templateForker adapts kernel/template to Forker, as the server does.
type templateForker struct{ *template.Provisioner }

func (f templateForker) Fork(ctx context.Context, spec kernel.LaunchSpec, env map[string]string, b ForkBox) (int, <-chan struct{}, error) {
	tb := template.Box{Holder: b.Holder, Start: b.Start, Cgroups: b.Cgroups, Seccomp: b.Seccomp, UID: b.UID}
	tb.Entered, _ = b.Entered.(*template.Entered)
	return f.ForkBoxed(ctx, spec, env, tb)
}

// Enter makes it a BoxEnterer: the spare boxes are entered ahead.
func (f templateForker) Enter(ctx context.Context, b ForkBox) (any, error) {
	e, err := f.EnterBox(ctx, template.Box{Holder: b.Holder, Start: b.Start, Cgroups: b.Cgroups, Seccomp: b.Seccomp, UID: b.UID})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// newForkingProvisioner is newProvisioner with a template (numpy pre-imported) forking its kernels.
func newForkingProvisioner(t *testing.T, tweak ...func(*ProvisionerConfig)) *Provisioner {
	t.Helper()
	m := newManager(t)
	spool := filepath.Join(filepath.Dir(m.cfg.StateDir), "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	pc := ProvisionerConfig{Defaults: Limits{Pids: 512}, MaxCPUs: 2, MaxMemory: 2 << 30, SpoolDir: spool}
	tp, err := template.New(template.Config{Python: "/usr/bin/python3", PreImport: []string{"numpy"},
		Env: pc.KernelEnv(), Dir: t.TempDir(), Local: &kernel.LocalProvisioner{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close() })
	// Launches wait 15 s at most for a warm template, then start cold (the documented fallback): a
	// loaded suite can take longer to import numpy, so the test waits for it first.
	for deadline := time.Now().Add(120 * time.Second); tp.Stats().PID == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the template was not warm in 120 s")
		}
	}
	pc.Forker = templateForker{tp}
	for _, f := range tweak {
		f(&pc)
	}
	return NewProvisioner(m, pc)
}

// boxFacts is what a kernel in a box says about itself.
type boxFacts struct {
	UID, PID, PPID int
	Status         map[string]string // /proc/self/status lines that matter
	Pids           []string          // /proc's numbered entries
	Workspace      []string
	Other          string // reading the other kernel's workspace file by its host path
	Net            []string
	Conn           string
	Preloaded      bool
	NP             string
	NS             map[string]string
	Cgroup         string
	Cwd            string
	Maps, Fds      []string // the files it maps and has open
	Authkey        string   // multiprocessing's
}

const boxFactsCode = `import os as _o, sys as _s, json as _j, socket as _so
_pre = 'numpy' in _s.modules
import numpy as _np
def _try(f):
    try:
        return str(f())
    except Exception as e:
        return type(e).__name__
_st = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
_facts = _j.dumps({'UID': _o.getuid(), 'PID': _o.getpid(), 'PPID': _o.getppid(),
  'Status': {k: ' '.join(_st[k].split()) for k in ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp')},
  'Pids': sorted(p for p in _o.listdir('/proc') if p.isdigit()), 'Workspace': sorted(_o.listdir('/workspace')),
  'Other': _try(lambda: open(OTHER).read()), 'Net': sorted(n for _, n in _so.if_nameindex()),
  'Conn': _try(lambda: _so.create_connection(('1.1.1.1', 53), timeout=2).close()),
  'Preloaded': _pre, 'NP': str(_np.random.randint(2**62)),
  'NS': {n: _o.readlink('/proc/self/ns/' + n) for n in ('mnt', 'pid', 'net', 'ipc', 'uts', 'cgroup')},
  'Cgroup': open('/proc/self/cgroup').read(), 'Cwd': _o.getcwd(),
  'Maps': sorted({l.split(None, 5)[5].strip() for l in open('/proc/self/maps') if len(l.split(None, 5)) == 6}),
  'Fds': sorted(_try(lambda: _o.readlink('/proc/self/fd/' + f)) for f in _o.listdir('/proc/self/fd')),
  'Authkey': __import__('multiprocessing').current_process().authkey.hex()})`

func boxFactsOf(t *testing.T, k *kernel.Kernel, other string) boxFacts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := k.Eval(ctx, "OTHER = "+strconv.Quote(other)+"\n"+boxFactsCode, "_facts")
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	var f boxFacts
	if err := json.Unmarshal([]byte(strings.Trim(out, "'")), &f); err != nil {
		t.Fatalf("facts %q: %v", out, err)
	}
	return f
}

// Two kernels forked from one template into boxes of their own: each has its box's uid, no
// capability, no_new_privs and the seccomp filter, namespaces of its own (not the host's, not its
// sibling's), only its own workspace, no network, its box's cgroup with its limit, its own RNG
// stream; its exit takes its box down.
func TestForkedKernelsAreBoxed(t *testing.T) {
	p := newForkingProvisioner(t)
	ks := make([]*kernel.Kernel, 2)
	var wg sync.WaitGroup
	for i := range ks {
		wg.Add(1)
		go func() { defer wg.Done(); ks[i] = startBoxedKernel(t, p) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ws := []string{t.TempDir(), t.TempDir()}
	var facts []boxFacts
	for i, k := range ks {
		bk := k.Process().(*boxKernel)
		if bk.fk == nil {
			t.Fatalf("kernel %d was started cold, not forked", i)
		}
		if err := os.WriteFile(filepath.Join(ws[i], "secret"+strconv.Itoa(i)), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := bk.AttachWorkspace(ws[i]); err != nil {
			t.Fatal(err)
		}
		if err := bk.SetLimits(kernel.Limits{Memory: "512Mi"}); err != nil {
			t.Fatal(err)
		}
		facts = append(facts, boxFactsOf(t, k, filepath.Join(ws[1-i], "secret"+strconv.Itoa(1-i))))
	}
	host := map[string]string{}
	for _, n := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		host[n], _ = os.Readlink("/proc/self/ns/" + n)
	}
	for i, f := range facts {
		bk := ks[i].Process().(*boxKernel)
		t.Run("kernel"+strconv.Itoa(i), func(t *testing.T) { checkBoxed(t, bk, f, host, "secret"+strconv.Itoa(i)) })
		for n, v := range f.NS {
			if v == facts[1-i].NS[n] {
				t.Errorf("kernel %d shares its %s namespace with its sibling: %s", i, n, v)
			}
		}
	}
	if facts[0].NP == facts[1].NP || facts[0].Authkey == facts[1].Authkey {
		t.Errorf("sibling kernels share numpy's RNG stream (%s) or multiprocessing's authkey (%s)", facts[0].NP, facts[0].Authkey)
	}
	for i, f := range facts {
		for _, m := range f.Maps { // nothing of the host outside what every box binds
			if strings.HasPrefix(m, "/") && !strings.HasPrefix(m, "/usr/") {
				t.Errorf("kernel %d maps %s", i, m)
			}
		}
		for _, fd := range f.Fds {
			if strings.HasPrefix(fd, "/") && !strings.HasPrefix(fd, "/dev/") && !strings.HasPrefix(fd, "/tmp/") {
				t.Errorf("kernel %d has %s open", i, fd)
			}
		}
		if st, err := ks[i].Process().Stats(); err != nil || st.RSSBytes < 20<<20 {
			t.Errorf("kernel %d: stats %+v, %v: the forked kernel is not counted", i, st, err)
		}
	}
	checkOwnMemory(t, ks[1])
	// Past its memory limit it is killed, and its death ends its box: nothing of its uid is left,
	// and the sibling runs on.
	bk := ks[0].Process().(*boxKernel)
	uid := bk.box.UID()
	_, _ = ks[0].Eval(context.Background(), "x = b'1' * (700 << 20)", "")
	select {
	case <-bk.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the forked kernel past its memory limit is still running")
	}
	if bk.box.cg != nil && bk.box.cg.has("memory") && bk.box.Events().OOMKills == 0 {
		t.Error("the kernel's death was not its box's OOM kill")
	}
	// Still running, that is: a killed process's zombie waits for whoever reaps it (the host's init
	// for the box's last ones), which is not the box's business.
	if pids := slices.DeleteFunc(pidsOfUID(uid), func(p int) bool { return !alive(p) }); len(pids) != 0 {
		t.Errorf("processes of the dead kernel's box left: %v", pids)
	}
	if got, err := ks[1].Eval(context.Background(), "", "1+1"); err != nil || got != "2" {
		t.Errorf("sibling after the exit: %q, %v", got, err)
	}
	// A restart is forked again, into the same box (its uid, workspace and limits).
	old := ks[1].Process().(*boxKernel)
	if err := ks[1].Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	cur := ks[1].Process().(*boxKernel)
	if cur.fk == nil || cur.kb != old.kb {
		t.Fatalf("restart: forked %v, same box %v", cur.fk != nil, cur.kb == old.kb)
	}
	if f := boxFactsOf(t, ks[1], "/nonexistent"); !slices.Equal(f.Workspace, []string{"secret1"}) || f.UID != cur.box.UID() ||
		f.Status["Seccomp"] != "2" {
		t.Errorf("after a restart: workspace %v uid %d status %v", f.Workspace, f.UID, f.Status)
	}
}

// checkOwnMemory: a forked kernel's own cost is its box's memory charge: far below its RSS (the
// template's pages it maps are not its box's), and it grows by what the kernel writes.
func checkOwnMemory(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	bk := k.Process().(*boxKernel)
	if bk.box.cg == nil || !bk.box.cg.has("memory") {
		return // no memory cgroup: the RSS is the cost (OwnBytes 0), checked above
	}
	before, err := k.Process().Stats()
	if err != nil || before.OwnBytes <= 0 || before.OwnBytes > before.RSSBytes/2 {
		t.Fatalf("a forked kernel's own memory: %+v, %v (want > 0 and under half its RSS)", before, err)
	}
	if _, err := k.Eval(context.Background(), "_own = bytearray(b'1' * (100 << 20))", ""); err != nil {
		t.Fatal(err)
	}
	defer k.Eval(context.Background(), "del _own", "")
	after, err := k.Process().Stats()
	if err != nil || after.OwnBytes-before.OwnBytes < 95<<20 {
		t.Errorf("100 MiB written: own memory %d -> %d MiB (%v)", before.OwnBytes>>20, after.OwnBytes>>20, err)
	}
	t.Logf("own memory %d -> %d MiB, RSS %d -> %d MiB", before.OwnBytes>>20, after.OwnBytes>>20, before.RSSBytes>>20, after.RSSBytes>>20)
}

// checkBoxed asserts what one forked kernel said about itself (f) against its box, one isolation
// property a subtest.
func checkBoxed(t *testing.T, bk *boxKernel, f boxFacts, host map[string]string, mine string) {
	uid := strconv.Itoa(bk.box.UID())
	t.Run("runs as its box's uid without privileges, under the filter", func(t *testing.T) {
		want := map[string]string{"Uid": strings.Repeat(uid+" ", 3) + uid, "Gid": strings.Repeat(uid+" ", 3) + uid,
			"Groups": "", "CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
		for k, v := range want {
			if f.Status[k] != v {
				t.Errorf("/proc/self/status %s: %q, want %q", k, f.Status[k], v)
			}
		}
		if f.UID != bk.box.UID() || f.Cwd != "/workspace" || !f.Preloaded {
			t.Errorf("uid %d cwd %s preloaded %v: want the box's uid, /workspace, numpy preloaded", f.UID, f.Cwd, f.Preloaded)
		}
	})
	t.Run("sees only its box's processes", func(t *testing.T) {
		if len(f.Pids) > 4 || f.PPID != 1 {
			t.Errorf("pids %v, parent %d: want the box's few, the box's init as parent", f.Pids, f.PPID)
		}
	})
	t.Run("sees only its own workspace", func(t *testing.T) {
		if !slices.Equal(f.Workspace, []string{mine}) || f.Other != "PermissionError" && f.Other != "FileNotFoundError" {
			t.Errorf("workspace %v (want [%s]); the sibling's file by its host path: %s", f.Workspace, mine, f.Other)
		}
	})
	t.Run("has no network", func(t *testing.T) {
		if !slices.Equal(f.Net, []string{"lo"}) || f.Conn == "None" {
			t.Errorf("network: interfaces %v, connect to 1.1.1.1: %s (want lo only, no way out)", f.Net, f.Conn)
		}
	})
	t.Run("has namespaces of its own", func(t *testing.T) {
		for n, v := range f.NS {
			if v == host[n] {
				t.Errorf("the kernel is in the host's %s namespace %s", n, v)
			}
		}
	})
	t.Run("is in its box's cgroup with its memory limit", func(t *testing.T) {
		if bk.box.cg == nil {
			sandboxtest.Missing(t, "no cgroups here: the box's memory limit is a cgroup limit")
		}
		if !slices.Contains(bk.box.cg.pids(), bk.fk.pid) {
			t.Errorf("the kernel %d is not in its box's cgroup (%v)", bk.fk.pid, bk.box.cg.pids())
		}
		if d, ok := bk.box.cg.dir("memory"); ok {
			file := "memory.limit_in_bytes"
			if bk.box.cg.root.v2 {
				file = "memory.max"
			}
			if b, _ := os.ReadFile(filepath.Join(d, file)); strings.TrimSpace(string(b)) != strconv.Itoa(512<<20) {
				t.Errorf("the box's memory limit: %q", b)
			}
		}
	})
}

// kill -9 of the template: the kernels it forked into boxes live on (they are not its children), and
// the next kernel is forked by the template started after it.
func TestForkedBoxOutlivesTemplate(t *testing.T) {
	p := newForkingProvisioner(t)
	tp := p.cfg.Forker.(templateForker).Provisioner
	k := startBoxedKernel(t, p)
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
	if got, err := k.Eval(context.Background(), "x = 41", "x + 1"); err != nil || got != "42" {
		t.Errorf("the kernel of a killed template: %q, %v", got, err)
	}
	k2 := startBoxedKernel(t, p)
	if bk := k2.Process().(*boxKernel); bk.fk == nil {
		t.Error("the kernel after the template's restart was started cold")
	}
	if st := tp.Stats(); st.Restarts != 1 || st.Forks != 2 {
		t.Errorf("template stats %+v, want 1 restart and 2 forks", st)
	}
}

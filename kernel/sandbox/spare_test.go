package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/kernel/template"
)

// A kernel launched while a spare box is ready is forked into that box (bubblewrap already ran, and
// the template's children entered it ahead: the first of them is in the box's namespaces and exits
// once the kernel is forked, and the kernel is the child that waited in the box, forked ahead):
// it is as isolated as a kernel whose box was made for it (the same subtests), sees its own runtime
// dir and no other kernel's, a restart is forked into the same box, and when it ends, or the
// provisioner closes with spares ready, no box, mount or dir is left.
func TestSpareBoxes(t *testing.T) {
	p := newForkingProvisioner(t, func(pc *ProvisionerConfig) { pc.SpareBoxes = 1 })
	rt := runtimeBase(t)
	first := startBoxedKernelIn(t, p, rt) // no spare yet: its runtime base is learnt now
	if st := p.Spares(); st.Served != 0 || st.Missed != 1 || st.Want != 1 {
		t.Fatalf("after the first launch: %+v", st)
	}
	for deadline := time.Now().Add(60 * time.Second); p.Spares().Ready != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no spare box ready in 60 s: %+v", p.Spares())
		}
	}
	entered := readySpareEntered(t, p)
	waiting := waitingChild(t, p)
	if adj := oomScoreAdj(t, waiting); adj != kernel.KernelOOMScoreAdj {
		t.Errorf("the waiting child's oom_score_adj is %d before any launch; want %d (set while it waits)", adj, kernel.KernelOOMScoreAdj)
	}
	k := startBoxedKernelIn(t, p, rt)
	bk := k.Process().(*boxKernel)
	if st := p.Spares(); st.Served != 1 || bk.fk == nil || !strings.HasPrefix(bk.box.Name(), "s") {
		t.Fatalf("the second launch: box %s forked %v, spares %+v: want a forked kernel in the spare", bk.box.Name(), bk.fk != nil, st)
	}
	if bk.fk.pid != waiting {
		t.Errorf("the kernel is pid %d; want %d, the child that waited in the spare (no fork at launch)", bk.fk.pid, waiting)
	}
	waitGone(t, entered, "the spare's entered first child, once its kernel was forked")
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "mine"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "theirs"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := bk.AttachWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	if err := bk.SetLimits(kernel.Limits{Memory: "512Mi"}); err != nil {
		t.Fatal(err)
	}
	f := boxFactsOf(t, k, filepath.Join(other, "theirs"))
	host := map[string]string{}
	for _, n := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		host[n], _ = os.Readlink("/proc/self/ns/" + n)
	}
	checkBoxed(t, bk, f, host, "mine")
	runtimeDirs, err := k.Eval(context.Background(), "import os", "sorted(os.listdir("+strconv.Quote(rt)+"))")
	if want := "['" + filepath.Base(k.RuntimeDir()) + "']"; err != nil || runtimeDirs != want {
		t.Errorf("the runtime base in the spare box lists %s, %v; want only its own kernel's %s (not %s)", runtimeDirs, err, want,
			filepath.Base(first.RuntimeDir()))
	}
	// A restart is forked again into the same (spare-born) box, its runtime dir bound at its path.
	if err := k.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cur := k.Process().(*boxKernel); cur.fk == nil || cur.kb != bk.kb {
		t.Fatalf("restart: forked %v, same box %v", cur.fk != nil, cur.kb == bk.kb)
	}
	if got, err := k.Eval(context.Background(), "import os", "sorted(os.listdir('/workspace'))"); err != nil || got != "['mine']" {
		t.Errorf("after a restart the workspace lists %s, %v", got, err)
	}
	boxDir := bk.box.dir
	if err := k.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := mountsUnder(boxDir); len(left) != 0 {
		t.Errorf("mounts left of the spare box: %v", left)
	}
	if _, err := os.Stat(boxDir); !os.IsNotExist(err) {
		t.Errorf("the spare box's dir is left: %v", err)
	}
	for deadline := time.Now().Add(60 * time.Second); p.Spares().Ready != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the spare was not replaced in 60 s: %+v", p.Spares())
		}
	}
	_ = first.Shutdown(context.Background())
	p.spares.close()
	if st := p.Spares(); st.Ready != 0 {
		t.Errorf("spares after close: %+v", st)
	}
	entries, _ := os.ReadDir(p.m.cfg.StateDir)
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("box dir left after the spares were closed: %s", e.Name())
		}
	}
}

// readySpareEntered waits for a ready spare box and answers the host pid of the template's first
// child that entered it ahead, after checking that it is in the box's mount and net namespaces.
func readySpareEntered(t *testing.T, p *Provisioner) int {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); p.Spares().Ready < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no spare box ready in 60 s: %+v", p.Spares())
		}
	}
	p.spares.mu.Lock()
	sp := p.spares.ready[0]
	p.spares.mu.Unlock()
	e, ok := sp.fb.Entered.(*template.Entered)
	if !ok || e == nil {
		t.Fatalf("the spare box was not entered ahead (%T)", sp.fb.Entered)
	}
	// The template answers a box's entry with its first child's pid at once and the child enters
	// the box after (template.py's _enter_box: the cgroup move's wait is paid while nobody waits),
	// so a spare is ready before its child is in the box's namespaces: on a loaded machine the
	// check ran first and found the child still in the host's (CI, 1 run in ~25).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var apart []string
		for _, ns := range []string{"mnt", "net"} {
			in, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", e.PID(), ns))
			want, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", sp.fb.Holder, ns))
			if in == "" || in != want {
				apart = append(apart, fmt.Sprintf("%s namespace %q, the box's holder in %q", ns, in, want))
			}
		}
		if len(apart) == 0 {
			return e.PID()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entered child %d is not in its box after 30 s: %s", e.PID(), strings.Join(apart, "; "))
		}
	}
}

// waitingChild waits until the ready spare box holds the template's waiting child and answers its
// host pid: the one child of the box's init besides the holder.
func waitingChild(t *testing.T, p *Provisioner) int {
	t.Helper()
	p.spares.mu.Lock()
	holder := p.spares.ready[0].fb.Holder
	p.spares.mu.Unlock()
	st, ok := procStat(holder)
	if !ok {
		t.Fatalf("the spare's holder %d is gone", holder)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var others []int
		for _, c := range childrenOf(st.ppid) {
			if c != holder {
				others = append(others, c)
			}
		}
		if len(others) == 1 {
			return others[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spare's init %d has children %v besides its holder %d after 30 s; want the waiting child alone", st.ppid, others, holder)
		}
	}
}

// oomScoreAdj reads pid's oom_score_adj.
func oomScoreAdj(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitGone waits (30 s at most) until pid has exited and was reaped.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs after 30 s", what, pid)
		}
	}
}

// kill -9 of the template while a spare box it entered waits: the entered children exit (nothing of
// the template's is left in the box), and the next kernel is forked into that spare by the template
// started after it, the usual way.
func TestEnteredSpareOutlivesItsTemplate(t *testing.T) {
	p := newForkingProvisioner(t, func(pc *ProvisionerConfig) { pc.SpareBoxes = 1 })
	tp := p.cfg.Forker.(templateForker).Provisioner
	rt := runtimeBase(t)
	startBoxedKernelIn(t, p, rt) // learns the runtime base: a spare is made after it
	entered := readySpareEntered(t, p)
	old := tp.Stats().PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, entered, "the entered first child of a killed template")
	for deadline := time.Now().Add(60 * time.Second); tp.Stats().PID == old || tp.Stats().PID == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no new template after kill -9 of the old one")
		}
	}
	k := startBoxedKernelIn(t, p, rt)
	if bk := k.Process().(*boxKernel); bk.fk == nil || p.Spares().Served != 1 {
		t.Fatalf("after the template's restart: forked %v, spares %+v; want a forked kernel in the spare", bk.fk != nil, p.Spares())
	}
	if got, err := k.Eval(context.Background(), "x = 41", "x + 1"); err != nil || got != "42" {
		t.Errorf("the kernel forked into the spare: %q, %v", got, err)
	}
}

// A spare box whose entered children were killed (its template lives on) is forked into the usual
// way: the launch still gets a forked kernel in that spare.
func TestEnteredSpareLostIsForkedAnew(t *testing.T) {
	p := newForkingProvisioner(t, func(pc *ProvisionerConfig) { pc.SpareBoxes = 1 })
	rt := runtimeBase(t)
	startBoxedKernelIn(t, p, rt)
	entered := readySpareEntered(t, p)
	if err := syscall.Kill(entered, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, entered, "the killed entered child")
	k := startBoxedKernelIn(t, p, rt)
	if bk := k.Process().(*boxKernel); bk.fk == nil || p.Spares().Served != 1 {
		t.Fatalf("forked %v, spares %+v; want a forked kernel in the spare", bk.fk != nil, p.Spares())
	}
	if got, err := k.Eval(context.Background(), "x = 41", "x + 1"); err != nil || got != "42" {
		t.Errorf("the kernel forked into the spare: %q, %v", got, err)
	}
}

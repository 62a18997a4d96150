package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

// A kernel launched while a spare box is ready is forked into that box (bubblewrap already ran):
// it is as isolated as a kernel whose box was made for it (the same subtests), sees its own runtime
// dir and no other kernel's, a restart is forked into the same box, and when it ends, or the
// provisioner closes with spares ready, no box, mount or dir is left.
func TestSpareBoxes(t *testing.T) {
	p := newForkingProvisioner(t, func(pc *ProvisionerConfig) { pc.SpareBoxes = 1 })
	rt, err := os.MkdirTemp("", "cos")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	first := startBoxedKernelIn(t, p, rt) // no spare yet: its runtime base is learnt now
	if st := p.Spares(); st.Served != 0 || st.Missed != 1 || st.Want != 1 {
		t.Fatalf("after the first launch: %+v", st)
	}
	for deadline := time.Now().Add(60 * time.Second); p.Spares().Ready != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no spare box ready in 60 s: %+v", p.Spares())
		}
	}
	k := startBoxedKernelIn(t, p, rt)
	bk := k.Process().(*boxKernel)
	if st := p.Spares(); st.Served != 1 || bk.fk == nil || !strings.HasPrefix(bk.box.Name(), "s") {
		t.Fatalf("the second launch: box %s forked %v, spares %+v: want a forked kernel in the spare", bk.box.Name(), bk.fk != nil, st)
	}
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

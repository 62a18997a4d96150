package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// With the sandbox and pool.templates on (the defaults), sessions' kernels are forked from the warm
// template into boxes of their own: the template's modules are there (numpy pre-imported, the
// template's box module), and each is still its own sandbox (its uid, the filter, no capability,
// its box's init as parent); siblings share no RNG stream. The isolation itself is what every other
// sandbox test of this package checks, on these forked kernels.
func TestSandboxedKernelsAreForked(t *testing.T) {
	t.Parallel()
	ts := sandboxedOwnTemplate(t, func(c *configs.Config) { c.Persistence.PreImport = []string{"numpy"} })
	ts.createForked("fa")
	ts.createForked("fb")
	code := `import os, sys
st = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
print('carryover_box' in sys.modules, 'numpy' in sys.modules, os.getuid(), os.getppid(),
      st['Seccomp'].strip(), st['CapEff'].strip(), st['NoNewPrivs'].strip())
import numpy; print(numpy.random.randint(2**62))`
	a, b := strings.Fields(ts.stdout("fa", code)), strings.Fields(ts.stdout("fb", code))
	for _, f := range [][]string{a, b} {
		if len(f) != 8 || f[0] != "True" || f[1] != "True" || f[2] == "0" || f[3] != "1" || f[4] != "2" ||
			f[5] != "0000000000000000" || f[6] != "1" {
			t.Errorf("kernel facts %v: want forked (the template's modules), the box's uid, init as parent, seccomp 2, no caps, no_new_privs", f)
		}
	}
	if len(a) == 8 && len(b) == 8 && (a[2] == b[2] || a[7] == b[7]) {
		t.Errorf("sibling sessions share a uid or an RNG stream: %v %v", a, b)
	}
	// GET /api/status shows the template: warm, its memory at rest, the kernels it forked, and the
	// spare boxes (pool.spare_boxes, default 2).
	st, err := ts.c.Status(ts.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if tm := st.Templates; tm == nil || tm.Live != 1 || tm.Forks < 2 || tm.USSBytes <= 0 || tm.RSSBytes < tm.USSBytes ||
		tm.PSSBytes < tm.USSBytes || tm.SpareBoxes == nil || tm.SpareBoxes.Want != 2 {
		t.Errorf("status templates = %s: want one warm template with its memory, >= 2 forks, spare boxes wanted 2", dump(tm))
	}
}

// kill -9 of the template that forked sandboxed kernels: the session's kernel (in its box, not the
// template's child) answers from the same process with its state, checkpoints go on, and a new
// template starts.
func TestSandboxedTemplateKilledLosesNothing(t *testing.T) {
	t.Parallel()
	ts := sandboxedOwnTemplate(t)
	ts.createForked("tk")
	before := ts.stdout("tk", "import os, sys\nv = 41\nprint(os.getpid(), 'carryover_box' in sys.modules)")
	tmpl := templateChild(t, ts.dir)
	if tmpl == 0 || !strings.HasSuffix(before, " True") {
		t.Fatalf("template %d, kernel %q: want a kernel forked from this server's template", tmpl, before)
	}
	if err := syscall.Kill(tmpl, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := ts.stdout("tk", "print(os.getpid(), 'carryover_box' in sys.modules)\nprint(v + 1)"); got != before+"\n42" {
		t.Fatalf("after kill -9 of the template the session answers %q, want %q and 42 from the same kernel", got, before)
	}
	if ts.session("tk").LastCheckpoint == nil {
		t.Fatal("no checkpoint committed")
	}
	deadline := time.Now().Add(90 * time.Second)
	for p := templateChild(t, ts.dir); p == 0 || p == tmpl; p = templateChild(t, ts.dir) {
		if time.Now().After(deadline) {
			t.Fatal("no new template after kill -9 of the old one")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createForked creates session id with a kernel forked from the template. Right after the server
// starts, launches wait for the template to be warm, but at most 15 s: under a loaded suite the pool's
// first kernels may have been started cold instead (the documented fallback). Such a session is
// restarted until its kernel is a forked one (the template's module is in it).
func (ts *testServer) createForked(id string) {
	ts.t.Helper()
	ts.create(id, nil)
	deadline := time.Now().Add(120 * time.Second)
	for ts.stdout(id, "import sys; print('carryover_box' in sys.modules)") != "True" {
		if time.Now().After(deadline) {
			ts.t.Fatalf("no forked kernel for %s in 120 s", id)
		}
		must(ts.t, 200, "restart "+id, func(ctx context.Context) (*client.Session, error) { return ts.c.Restart(ctx, id) })
	}
}

// templateChild is the pid of the kernel template of the server whose data dir is dir (0: none):
// servers run in this test process, and the template's script lives in its data dir.
func templateChild(t *testing.T, dir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.Contains(string(cmd), filepath.Join(dir, "template", "carryover_template")) {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
				return pid
			}
		}
	}
	return 0
}

package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/carryover/carryover/client"
)

// libRows are the library settings and module objects of issue 41, one per row: the cell that sets
// it, the cell that changes it again after the checkpoint, and the probe. Each row failed on the
// main of then: the setting came back as the library's default, the name as a copy of the module's
// object. (torch's and scikit-learn's settings are rows of the agent's test_libstate.py: their
// imports would triple this test's time.)
var libRows = []struct{ name, set, undo, probe string }{
	{"pandas option", "pd.set_option('display.max_rows', 7)", "pd.set_option('display.max_rows', 9)",
		"pd.get_option('display.max_rows')"},
	{"numpy print options", "np.set_printoptions(precision=3)", "np.set_printoptions(precision=5)",
		"np.get_printoptions()['precision']"},
	{"numpy seterr", "np.seterr(divide='ignore')", "np.seterr(divide='raise')", "np.geterr()['divide']"},
	{"matplotlib style and rcParams", "plt.style.use('ggplot'); matplotlib.rcParams['lines.linewidth'] = 5",
		"plt.style.use('default')", "[matplotlib.rcParams['lines.linewidth'], matplotlib.rcParams['axes.facecolor']]"},
	{"logging level", "logging.getLogger('mylog').setLevel(logging.ERROR)", "logging.getLogger('mylog').setLevel(10)",
		"logging.getLogger('mylog').level"},
	{"logging handler", "logging.getLogger('app').addHandler(logging.FileHandler('app.log'))",
		"logging.getLogger('app').handlers.clear()",
		"[type(h).__name__ + ' ' + os.path.basename(h.baseFilename) for h in logging.getLogger('app').handlers]"},
	{"warnings filter", "warnings.filterwarnings('ignore', message='zzz')", "warnings.resetwarnings()",
		"any(f[1] is not None and f[1].pattern == 'zzz' for f in warnings.filters)"},
	{"sys.path entry", "sys.path.append('/tmp/carryover-extra')", "sys.path.remove('/tmp/carryover-extra')",
		"'/tmp/carryover-extra' in sys.path"},
	{"decimal context", "decimal.getcontext().prec = 5", "decimal.getcontext().prec = 9", "decimal.getcontext().prec"},
	{"from scipy.stats import norm", "from scipy.stats import norm", "norm = 1", "norm is scipy.stats.norm"},
	{"a frozen distribution", "d = scipy.stats.norm(2, 3)", "d = 1", "d.dist._random_state is np.random.mtrand._rand"},
	{"from matplotlib import rcParams", "from matplotlib import rcParams", "rcParams = 1", "rcParams is matplotlib.rcParams"},
	{"from os import environ", "from os import environ", "environ = 1", "environ is os.environ"},
	{"from random import randint", "from random import randint", "randint = 1", "randint.__self__ is random._inst"},
}

const libImports = "import os, sys, json, random, logging, warnings, decimal\nimport numpy as np, pandas as pd\n" +
	"import matplotlib, matplotlib.pyplot as plt, scipy.stats"

// libDraw is issue 41's check of norm's random state: after a restore it must draw what a kernel
// never killed draws.
const libDraw = "np.random.seed(0); print(json.dumps(norm.rvs(size=5).tolist()))"

func libProbe() string {
	ps := make([]string, len(libRows))
	for i, r := range libRows {
		ps[i] = r.probe
	}
	return "print(json.dumps([" + strings.Join(ps, ", ") + "]))"
}

// TestLibraryStateEveryRestorePath sets every row in a session, then checks each row's probe, and
// norm's draws, against the live kernel's after each restore path: a kill -9 of the kernel, a fork,
// a checkpoint restore into the kernel that changed them all since, and a server restart (the wake
// into a new kernel). Every restore reports nothing failed.
func TestLibraryStateEveryRestorePath(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "lib"})
	var set []string
	for _, r := range libRows {
		set = append(set, r.set)
	}
	if out := ts.run("lib", libImports+"\n"+strings.Join(set, "\n")); out.Error != nil {
		t.Fatalf("set-up: %s", dump(out))
	}
	live := probeRows(t, ts, "lib")
	cp := ts.run("lib", "pass").Checkpoint
	draw := ts.run("lib", libDraw).Stdout
	if cp == nil || !strings.HasPrefix(draw, "[") {
		t.Fatalf("checkpoint %v, draw %q", cp, draw)
	}

	if err := syscall.Kill(kernelPID(t, ts, "lib"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30e9, "kernel_died", func() bool { return len(ts.eventTypes("lib", 0, "kernel_died")) == 1 })
	out := ts.run("lib", libDraw)
	if out.Stdout != draw || out.Restore == nil || len(out.Restore.Failed) != 0 {
		t.Errorf("kernel kill: draw %q, want %q; restore %s", out.Stdout, draw, dump(out.Restore))
	}
	checkRows(t, "kernel kill", live, probeRows(t, ts, "lib"))

	fork := ts.fork("lib", client.ForkRequest{SessionID: "lib-fork"})
	checkRows(t, "fork", live, probeRows(t, ts, fork.ID))

	var undo []string
	for _, r := range libRows {
		undo = append(undo, r.undo)
	}
	ts.run("lib", strings.Join(undo, "\n"))
	res := must(t, 200, "restore", func(ctx context.Context) (*client.RestoreResult, error) {
		_, r, err := ts.c.RestoreCheckpoint(ctx, "lib", cp.ID)
		return r, err
	})
	if len(res.Failed) != 0 {
		t.Errorf("checkpoint restore failed: %s", dump(res.Failed))
	}
	checkRows(t, "checkpoint restore", live, probeRows(t, ts, "lib"))

	ts2 := ts.restart()
	if out := ts2.run("lib", libDraw); out.Stdout != draw {
		t.Errorf("server restart: draw %q, want %q", out.Stdout, draw)
	}
	checkRows(t, "server restart", live, probeRows(t, ts2, "lib"))
}

// probeRows runs every row's probe in session id: one JSON value per row.
func probeRows(t *testing.T, ts *testServer, id string) []json.RawMessage {
	t.Helper()
	out := ts.run(id, libProbe())
	var got []json.RawMessage
	if err := json.Unmarshal([]byte(out.Stdout), &got); err != nil || len(got) != len(libRows) {
		t.Fatalf("probe of %s: %v: %s", id, err, dump(out))
	}
	return got
}

func checkRows(t *testing.T, path string, want, got []json.RawMessage) {
	t.Helper()
	for i, r := range libRows {
		if string(got[i]) != string(want[i]) {
			t.Errorf("%s: %s: %s, want %s", path, r.name, got[i], want[i])
		}
	}
}

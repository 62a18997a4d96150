package persistence_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

const fidelityCells = `
import numpy as np, random
np.random.seed(3); random.seed(3)
np.random.rand(2); random.random()
big = np.zeros(2 << 20)  # 16 MiB: large enough for dirty-page tracking
class Acc:
    def __init__(self):
        self.total = 0
    def __reduce__(self):
        return (Acc, ())  # forgets total
acc = Acc(); acc.total = 5
`

// TestCheckpointFidelityThroughServer runs the engine's fidelity features through the Go side with a
// real kernel killed with SIGKILL: the global random state continues after a restore, state groups
// are not reported as variables, how large buffers were diffed is in the timings, and a value that
// restores differently stays named in skipped after the restore.
func TestCheckpointFidelityThroughServer(t *testing.T) {
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "f")
	k := agentKernel(t, c, ws, spool)
	run(t, k, fidelityCells)
	res, err := c.Checkpoint(ctx, k, "f", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	assertNoState(t, "saved", res.Saved)
	if !skippedHas(res.Skipped, "acc", "saved, but") {
		t.Errorf("skipped = %+v, want acc (saved, but ...)", res.Skipped)
	}
	run(t, k, "big[5] = 1.0")
	res, err = c.Checkpoint(ctx, k, "f", 2, ws)
	if err != nil {
		t.Fatal(err)
	}
	if res.Timings.DirtyMode != "uffd" && res.Timings.DirtyFallback == "" {
		t.Errorf("dirty mode %q without a fallback reason", res.Timings.DirtyMode)
	}
	if res.Timings.DirtyMode == "" {
		t.Errorf("a 16 MiB array was diffed but the timings do not say how: %+v", res.Timings)
	}
	cp, err := c.Store.LatestCheckpoint(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	assertNoState(t, "variables", c.Variables(cp))
	d, err := c.Detail(ctx, c.Store, cp)
	if err != nil {
		t.Fatal(err)
	}
	var detailNames []string
	for _, v := range d.Variables {
		detailNames = append(detailNames, v.Name)
	}
	assertNoState(t, "checkpoint detail (the UI's diff)", detailNames)
	probe := "(np.random.rand(), random.random(), float(big[5]))"
	live := eval(t, k, probe)

	killKernel(t, k)
	k2 := agentKernel(t, c, ws, spool)
	rr, err := c.Restore(ctx, k2, "f", "", ws, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failed) != 0 {
		t.Fatalf("failed: %+v", rr.Failed)
	}
	assertNoState(t, "restored", rr.Restored)
	if got := eval(t, k2, probe); got != live {
		t.Errorf("after restore %s = %s, the live kernel drew %s", probe, got, live)
	}
	run(t, k2, "x = 1")
	res, err = c.Checkpoint(ctx, k2, "f", 3, ws)
	if err != nil {
		t.Fatal(err)
	}
	if !skippedHas(res.Skipped, "acc", "saved, but") {
		t.Errorf("after the restore skipped = %+v, want acc still named", res.Skipped)
	}
}

func assertNoState(t *testing.T, what string, names []string) {
	t.Helper()
	for _, n := range names {
		if strings.HasPrefix(n, "@") {
			t.Errorf("%s lists interpreter state %q as a variable: %v", what, n, names)
		}
	}
}

func skippedHas(s []carryover.VarSkip, name, reasonPrefix string) bool {
	for _, v := range s {
		if v.Name == name && strings.HasPrefix(v.Reason, reasonPrefix) {
			return true
		}
	}
	return false
}

// TestPreImport: Install alone imports nothing (a kernel started on demand does not wait for imports);
// Warm loads the modules (not bound in the namespace, so no checkpoint saves them); a module that is
// not installed is ignored.
func TestPreImport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ws, spool := filepath.Join(dir, "ws"), filepath.Join(dir, "spool")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	c := newCheckpointer(t, filepath.Join(dir, "db.sqlite"))
	c.PreImport = []string{"numpy", "no_such_module_carryover", "wave"}
	mustSession(t, c, "p")
	k := startKernel(t, ws)
	if err := c.Install(ctx, k, spool, spool); err != nil {
		t.Fatal(err)
	}
	if got := eval(t, k, "'wave' in __import__('sys').modules"); got != "False" {
		t.Fatalf("Install imported the pre-imports: wave loaded = %s", got)
	}
	if err := c.Warm(ctx, k); err != nil {
		t.Fatal(err)
	}
	res, err := c.Checkpoint(ctx, k, "p", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Saved) != 0 {
		t.Errorf("pre-imported modules became variables: %v", res.Saved)
	}
	got := eval(t, k, "[m in __import__('sys').modules for m in ('numpy', 'wave', 'no_such_module_carryover')], 'numpy' in dir()")
	if got != "([True, True, False], False)" {
		t.Errorf("modules loaded / bound = %s", got)
	}
}

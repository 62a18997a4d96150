package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// preImport makes the warm pool import mods.
func preImport(mods ...string) func(*configs.Config) {
	return func(c *configs.Config) { c.Persistence.PreImport = mods }
}

// TestPoolKernelsArePreImported: a session that claims a warm pooled kernel finds
// persistence.pre_import's modules loaded (a module that is not installed is ignored), not bound in
// its namespace, and its first checkpoint saves none of them; also in the sandbox.
func TestPoolKernelsArePreImported(t *testing.T) {
	t.Parallel()
	wave := preImport("no_such_module_carryover", "wave") // wave: a module IPython does not load
	for name, start := range map[string]func() *testServer{
		"plain":     func() *testServer { return startServer(t, "", wave) },
		"sandboxed": func() *testServer { return sandboxed(t, wave) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ts := start()
			_, r := claimPooled(t, ts, "wave")
			if got := resultOf(r); got != "(True, False)" {
				t.Errorf("wave loaded, bound = %s", got)
			}
			if r.Checkpoint == nil || len(r.Checkpoint.Saved) != 1 || r.Checkpoint.Saved[0] != "sys" {
				t.Errorf("first checkpoint saved %s, want only sys", dump(r.Checkpoint))
			}
		})
	}
}

// TestPoolWarmUpIsNotCharged: the CPU a pooled kernel spent starting and importing pre_import before
// a session claimed it is not the session's: its budget's cpu_seconds counts only its own turns.
func TestPoolWarmUpIsNotCharged(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", preImport("numpy", "pandas")) // ~1 s of CPU with the kernel's start
	id, _ := claimPooled(t, ts, "pandas")
	time.Sleep(1100 * time.Millisecond) // the turn's end samples the cost at most once a second
	ts.run(id, "2+2")
	if cpu := ts.session(id).BudgetConsumed.CPUSeconds; cpu > 0.3 {
		t.Errorf("cpu_seconds = %.3f after two short turns: the pooled kernel's warm-up was charged", cpu)
	}
}

// claimPooled creates sessions until one claims a pooled kernel that has imported mod (a session
// created before the pool has filled gets a kernel started on demand, which skips the imports). It
// returns the session and the answer of its first turn, `mod in sys.modules, mod in dir()`.
func claimPooled(t *testing.T, ts *testServer, mod string) (string, *client.RunResult) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; ; i++ {
		s := ts.newSession(client.CreateRequest{})
		r := ts.run(s.ID, fmt.Sprintf("import sys\n%q in sys.modules, %q in dir()", mod, mod))
		if strings.HasPrefix(resultOf(r), "(True,") {
			return s.ID, r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session got a pooled kernel with %s imported in %d tries (last: %s)", mod, i+1, dump(r))
		}
		time.Sleep(time.Second)
	}
}

// TestImportTimeEnvGetsItsOwnKernel: a session whose context, or whose first run's env, sets a
// variable that libraries read only when imported (OMP_NUM_THREADS) does not get a pooled kernel that
// imported them before the variable was set, but a kernel of its own; other sessions still get
// pooled ones.
func TestImportTimeEnvGetsItsOwnKernel(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", preImport("wave"), func(c *configs.Config) { c.Pool.Size = 2 })
	claimPooled(t, ts, "wave")  // the pool serves pre-imported kernels...
	time.Sleep(3 * time.Second) // ...and has refilled
	id := ts.newSession(client.CreateRequest{}).ID
	mustDo(t, 200, "context", func(ctx context.Context) error {
		_, err := ts.c.PatchContext(ctx, id, client.ContextRequest{EnvVars: map[string]string{"OMP_NUM_THREADS": "1"}})
		return err
	})
	probe := "import sys, os\nprint('wave' in sys.modules, os.environ['OMP_NUM_THREADS'])"
	if got := ts.run(id, probe).Stdout; got != "False 1\n" {
		t.Errorf("context env: wave pre-imported, OMP_NUM_THREADS = %q, want a kernel of its own with the variable", got)
	}
	claimPooled(t, ts, "wave") // still pooled for the others...
	time.Sleep(3 * time.Second)
	id = ts.newSession(client.CreateRequest{}).ID
	r := ts.runReq(id, client.RunRequest{Code: probe, Env: map[string]string{"OMP_NUM_THREADS": "2"}})
	if r.Stdout != "False 2\n" {
		t.Errorf("per-run env: %q, want a kernel of its own with the variable", r.Stdout)
	}
	claimPooled(t, ts, "wave")
}

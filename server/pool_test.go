package server_test

import (
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// preImportWave makes the warm pool import wave (a module IPython does not load) and one that is not
// installed.
func preImportWave(c *configs.Config) {
	c.Persistence.PreImport = []string{"no_such_module_carryover", "wave"}
}

// TestPoolKernelsArePreImported: a session that claims a warm pooled kernel finds
// persistence.pre_import's modules loaded (a module that is not installed is ignored), not bound in
// its namespace, and its first checkpoint saves none of them; also in the sandbox.
func TestPoolKernelsArePreImported(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) { t.Parallel(); claimPreImported(t, startServer(t, "", preImportWave)) })
	t.Run("sandboxed", func(t *testing.T) { t.Parallel(); claimPreImported(t, sandboxed(t, preImportWave)) })
}

// claimPreImported creates sessions until one claims a pooled kernel (one created before the pool
// has filled gets a kernel started on demand, which skips the imports) and checks what it finds.
func claimPreImported(t *testing.T, ts *testServer) {
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; ; i++ {
		s := ts.newSession(client.CreateRequest{})
		r := ts.run(s.ID, "import sys\n'wave' in sys.modules, 'wave' in dir()")
		if got := resultOf(r); got == "(True, False)" {
			if r.Checkpoint == nil || len(r.Checkpoint.Saved) != 1 || r.Checkpoint.Saved[0] != "sys" {
				t.Errorf("first checkpoint saved %s, want only sys", dump(r.Checkpoint))
			}
			return
		} else if got != "(False, False)" {
			t.Fatalf("wave loaded, bound = %s (%s)", got, dump(r))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session got a pre-imported pooled kernel in %d tries", i+1)
		}
		time.Sleep(time.Second)
	}
}

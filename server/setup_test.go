package server_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestFirstCellCarriesSetup: a new session's first cell brings the session's working directory and
// env vars with it (no set-up request of its own) and runs in them, with execution count 1; the
// checkpoint after it records that cwd. A blank first cell, on which IPython runs no hook, gets the
// set-up sent first. A started session's kernel takes a context PATCH before its first cell.
func TestFirstCellCarriesSetup(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	probe := "import os\nprint(os.getcwd(), os.environ.get('CARRYOVER_T'), __carryover__.setups)"
	setContext := func(id, dir, env string) {
		mustDo(t, 200, "context", func(ctx context.Context) error {
			_, err := ts.c.PatchContext(ctx, id, client.ContextRequest{WorkingDir: &dir, EnvVars: map[string]string{"CARRYOVER_T": env}})
			return err
		})
	}
	ws := func(id, sub string) string { return filepath.Join(ts.dir, "workspaces", id, sub) }

	a := ts.newSession(client.CreateRequest{}).ID
	setContext(a, "sub", "1")
	r := ts.run(a, probe)
	if want := ws(a, "sub") + " 1 1\n"; r.Stdout != want || r.ExecutionCount != 1 {
		t.Errorf("first cell: %q (count %d), want %q (count 1)", r.Stdout, r.ExecutionCount, want)
	}
	// Kill the kernel: the session comes back where the checkpoint says it was.
	ts.act(ts.c.Restart, a)
	if got, want := ts.run(a, "print(os.getcwd())").Stdout, ws(a, "sub")+"\n"; got != want {
		t.Errorf("cwd after a restart = %q, want %q", got, want)
	}

	b := ts.newSession(client.CreateRequest{}).ID
	setContext(b, "sub", "2")
	if r := ts.run(b, "  \n"); r.Status != "ok" || r.ExecutionCount != 1 {
		t.Errorf("blank first cell: %s", dump(r))
	}
	if got, want := ts.run(b, probe).Stdout, ws(b, "sub")+" 2 0\n"; got != want {
		t.Errorf("after a blank first cell: %q, want %q", got, want)
	}

	c := ts.newSession(client.CreateRequest{Start: true}).ID // started: set up at once, then changed
	setContext(c, "other", "3")
	if got, want := ts.run(c, probe).Stdout, ws(c, "other")+" 3 0\n"; got != want {
		t.Errorf("context changed before the first cell: %q, want %q", got, want)
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/persistence/sqlite"
)

// fork forks session id (201).
func (ts *testServer) fork(id string, req client.ForkRequest) *client.Session {
	ts.t.Helper()
	return must(ts.t, 201, "fork "+id, func(ctx context.Context) (*client.Session, error) { return ts.c.Fork(ctx, id, req) })
}

// checkpoints lists a session's checkpoints, newest first (200).
func (ts *testServer) checkpoints(id string) []client.CheckpointInfo {
	ts.t.Helper()
	return must(ts.t, 200, "checkpoints of "+id, func(ctx context.Context) ([]client.CheckpointInfo, error) { return ts.c.Checkpoints(ctx, id) })
}

// A fork holds the namespace and files of the source's checkpoint without writing a chunk; the two
// go on independently; forks at an older checkpoint; errors; the fork outlives its deleted source
// (and a GC) across a restart.
func TestFork(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "src", Name: "origin", Data: map[string]any{"k": "v"}, ClientID: "agent-1",
		Budget: &client.Budget{IterationLimit: 50}})
	r1 := ts.run("src", "x = [1, 2, 3]\nopen('f.txt', 'w').write('one')")
	if r1.Checkpoint == nil {
		t.Fatalf("no checkpoint: %s", dump(r1))
	}
	cp1 := r1.Checkpoint.ID
	ts.run("src", "x.append(4)\nopen('f.txt', 'w').write('two')\nsecond = True")

	// Default: the source has a live kernel, so it is checkpointed first and the fork has its state now.
	before := len(ts.checkpoints("src"))
	fk := ts.fork("src", client.ForkRequest{SessionID: "fk"})
	if fk.ID != "fk" || fk.State != "pending" || fk.Name != "origin" || fk.Data["k"] != "v" || fk.Tenant != ts.session("src").Tenant ||
		fk.Budget.IterationLimit != 50 || fk.BudgetConsumed.Iterations != 0 || fk.LastCheckpoint == nil || fk.ClientID != "" {
		t.Fatalf("fork: %s", dump(fk))
	}
	srcCps := ts.checkpoints("src")
	if len(srcCps) != before+1 {
		t.Fatalf("the source was not checkpointed at the fork: %d -> %d checkpoints", before, len(srcCps))
	}
	fkCps := ts.checkpoints("fk")
	if len(fkCps) != 1 || fkCps[0].ID != fk.LastCheckpoint.ID || fkCps[0].Turn != srcCps[0].Turn ||
		strings.Join(fkCps[0].Variables, ",") != strings.Join(srcCps[0].Variables, ",") {
		t.Fatalf("fork checkpoints %s, source %s", dump(fkCps), dump(srcCps[0]))
	}
	// No chunk written: the fork checkpoint's bytes are its manifest's only.
	if fkCps[0].Bytes <= 0 || fkCps[0].Bytes > 2048 {
		t.Fatalf("the fork's checkpoint wrote %d bytes; want the manifest only", fkCps[0].Bytes)
	}
	// The files come back on first use, before any run.
	if got := string(ts.getFile("fk", "f.txt")); got != "two" {
		t.Fatalf("fork file before its first run: %q", got)
	}
	if got := resultOf(ts.run("fk", "x.append(5)\nopen('f.txt', 'w').write('fork')\n(x, second)")); got != "([1, 2, 3, 4, 5], True)" {
		t.Fatalf("fork x: %q", got)
	}
	if got := resultOf(ts.run("src", "x")); got != "[1, 2, 3, 4]" {
		t.Fatalf("source x after the fork's append: %q", got)
	}
	if got := string(ts.getFile("src", "f.txt")); got != "two" {
		t.Fatalf("source file after the fork wrote its own: %q", got)
	}
	ts.run("src", "x.append(6)\nopen('f.txt', 'w').write('src')")
	if got := resultOf(ts.run("fk", "x")); got != "[1, 2, 3, 4, 5]" {
		t.Fatalf("fork x after the source's append: %q", got)
	}
	if got := string(ts.getFile("fk", "f.txt")); got != "fork" {
		t.Fatalf("fork file after the source wrote its own: %q", got)
	}

	// Events on both sides.
	checkForked := func(id, other, cid string) {
		t.Helper()
		evs := ts.events(id, 0, 1000, "session_forked")
		for _, e := range evs {
			var p struct {
				SessionID    string `json:"session_id"`
				CheckpointID string `json:"checkpoint_id"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			if p.SessionID == other && (cid == "" || p.CheckpointID == cid) && p.CheckpointID != "" {
				return
			}
		}
		t.Fatalf("no session_forked {%s, %s} on %s: %s", other, cid, id, dump(evs))
	}
	checkForked("src", "fk", srcCps[0].ID)
	checkForked("fk", "src", srcCps[0].ID)

	// At an older checkpoint, with a generated id.
	old := ts.fork("src", client.ForkRequest{CheckpointID: cp1})
	if !strings.HasPrefix(old.ID, "sess_") || old.LastCheckpoint == nil || old.LastCheckpoint.Turn != r1.Checkpoint.Turn {
		t.Fatalf("fork at %s: %s", cp1, dump(old))
	}
	checkForked("src", old.ID, cp1)

	// Errors.
	errCode(t, errOf(ts.c.Fork(ts.ctx(), "nosuch", client.ForkRequest{})), 404, "not_found")
	errCode(t, errOf(ts.c.Fork(ts.ctx(), "src", client.ForkRequest{SessionID: "fk"})), 409, "conflict")
	errCode(t, errOf(ts.c.Fork(ts.ctx(), "src", client.ForkRequest{CheckpointID: "ckpt_nosuch"})), 404, "not_found")
	errCode(t, errOf(ts.c.Fork(ts.ctx(), "src", client.ForkRequest{CheckpointID: fkCps[0].ID})), 404, "not_found") // not the source's
	errCode(t, errOf(ts.c.Fork(ts.ctx(), "src", client.ForkRequest{SessionID: "bad id"})), 400, "invalid_request")

	// Delete the source (and the first fork): the older fork, never used yet, keeps the shared chunks
	// through a GC and restores its namespace and files after a restart.
	mustDo(t, 204, "delete src", func(ctx context.Context) error { return ts.c.DeleteSession(ctx, "src") })
	mustDo(t, 204, "delete fk", func(ctx context.Context) error { return ts.c.DeleteSession(ctx, "fk") })
	ts.stop()
	st, err := sqlite.Open(filepath.Join(ts.dir, "carryover.db"))
	if err != nil {
		t.Fatal(err)
	}
	n, b, err := st.GC(context.Background())
	st.Close()
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	t.Logf("GC after deleting the source and a fork: %d chunks, %d bytes freed (the deletes ran one of their own)", n, b)
	ts = startServer(t, ts.dir)
	if got := resultOf(ts.run(old.ID, "x")); got != "[1, 2, 3]" {
		t.Fatalf("fork of the deleted source after GC and restart: x = %q", got)
	}
	if got := string(ts.getFile(old.ID, "f.txt")); got != "one" {
		t.Fatalf("fork of the deleted source after GC and restart: f.txt = %q", got)
	}
	if st := ts.session(old.ID); st.State != "running" {
		t.Fatalf("fork after its first run: %s", st.State)
	}
}

// Forking a session holding 256 MiB writes no chunk: the wall time is logged, nothing is asserted
// about it.
func TestForkLarge(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "big"})
	r := ts.run("big", "import numpy as np\nbig = np.arange(1 << 25, dtype=np.int64)  # 256 MiB")
	if r.Checkpoint == nil || r.Checkpoint.BytesWritten < 1<<20 {
		t.Fatalf("checkpoint of the big session: %s", dump(r.Checkpoint))
	}
	start := time.Now()
	fk := ts.fork("big", client.ForkRequest{SessionID: "bigfork"})
	took := time.Since(start)
	cps := ts.checkpoints("bigfork")
	if len(cps) != 1 || cps[0].Bytes > 2048 || !contains(cps[0].Variables, "big") {
		t.Fatalf("fork checkpoint: %s", dump(cps))
	}
	t.Logf("fork of a session holding 256 MiB (source checkpointed first, %d bytes written by its first checkpoint): %v; fork checkpoint bytes %d",
		r.Checkpoint.BytesWritten, took.Round(time.Millisecond), cps[0].Bytes)
	_ = fk
	mustDo(t, 204, "delete big", func(ctx context.Context) error { return ts.c.DeleteSession(ctx, "big") })
	start = time.Now()
	if got := resultOf(ts.run("bigfork", "int(big[-1])")); got != "33554431" {
		t.Fatalf("big[-1] in the fork: %q", got)
	}
	t.Logf("first run of the fork (kernel + 256 MiB restore): %v", time.Since(start).Round(time.Millisecond))
}

// A sandboxed fork: its kernel starts in its own /workspace (the same path as the source's), with
// the source's cwd below it and its files, and writes only its own workspace.
func TestForkSandboxed(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.newSession(client.CreateRequest{SessionID: "s"})
	ts.run("s", "import os\nos.makedirs('d', exist_ok=True)\nos.chdir('d')\nx = [1]\nopen('f.txt', 'w').write('one')")
	ts.fork("s", client.ForkRequest{SessionID: "f"})
	if got := resultOf(ts.run("f", "import os\n(x, os.getcwd(), open('f.txt').read())")); got != "([1], '/workspace/d', 'one')" {
		t.Fatalf("fork: %q", got)
	}
	ts.run("f", "open('f.txt', 'w').write('fork')")
	if got := string(ts.getFile("s", "d/f.txt")); got != "one" {
		t.Fatalf("source file after the fork wrote its own: %q", got)
	}
}

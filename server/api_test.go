package server_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// TestFilesAPI: PUT, POST (utf-8 and base64), list, GET, DELETE, and files written by code.
func TestFilesAPI(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "f"})
	must(t, 201, "put in.csv", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutFile(ctx, "f", "data/in.csv", []byte("a,b\n1,2\n"))
	})
	must(t, 201, "post blob", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PostFile(ctx, "f", "/workspace/bin/blob", base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "base64")
	})
	r := ts.run("f", "import csv\nrows = list(csv.reader(open('data/in.csv')))\nprint(rows, list(open('bin/blob','rb').read()))\nopen('out/result.txt','w') if False else None\nimport os\nos.makedirs('out', exist_ok=True)\nopen('out/result.txt','w').write('done')")
	if !strings.HasPrefix(r.Stdout, "[['a', 'b'], ['1', '2']] [0, 1, 2, 255]") {
		t.Fatalf("code could not read uploads: %s", dump(r))
	}
	l := must(t, 200, "list files", func(ctx context.Context) ([]client.FileInfo, error) { return ts.c.ListFiles(ctx, "f") })
	var paths []string
	for _, f := range l {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, ",") != "bin/blob,data/in.csv,out/result.txt" {
		t.Fatalf("list: %v", paths)
	}
	if g := ts.getFile("f", "out/result.txt"); string(g) != "done" {
		t.Fatalf("get: %q", g)
	}
	// The API takes /workspace paths in the URL too (the typed client strips the prefix itself).
	if g := ts.raw("GET", "/api/sessions/f/files/%2Fworkspace%2Fdata%2Fin.csv", ""); g.Status != 200 || string(g.Body) != "a,b\n1,2\n" {
		t.Fatalf("get by /workspace path: %d %q", g.Status, g.Body)
	}
	mustDo(t, 204, "delete in.csv", func(ctx context.Context) error { return ts.c.DeleteFile(ctx, "f", "data/in.csv") })
	errCode(t, errOf(ts.c.GetFile(ts.ctx(), "f", "data/in.csv")), 404, "not_found")
	if r := ts.run("f", "import os\nos.path.exists('data/in.csv')"); resultOf(r) != "False" {
		t.Fatalf("%s", dump(r))
	}
}

// TestCheckpointsListAndRestore: each turn is a checkpoint; restoring one brings back that turn's
// namespace and files; skipped variables are reported in the answer and as an event.
func TestCheckpointsListAndRestore(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "c"})
	r1 := ts.run("c", "a = 1\nopen('v.txt','w').write('one')")
	if r1.Checkpoint == nil || r1.Checkpoint.ID == "" || !contains(r1.Checkpoint.Saved, "a") {
		t.Fatalf("no checkpoint in answer: %s", dump(r1))
	}
	r2 := ts.run("c", "a = 2\nb = 3\ngen = (i for i in range(3))\nopen('v.txt','w').write('two')\nopen('new.txt','w').write('x')")
	if r2.Checkpoint == nil {
		t.Fatalf("no checkpoint in answer: %s", dump(r2))
	}
	if sk := r2.Checkpoint.Skipped; len(sk) != 1 || sk[0].Name != "gen" || sk[0].Reason == "" {
		t.Fatalf("generator not reported: %s", dump(r2))
	}
	// Reported in every answer while it lasts, but one event for as long as the list is unchanged.
	if r := ts.run("c", "c2 = 1"); r.Checkpoint == nil || !skipped(r.Checkpoint.Skipped, "gen") {
		t.Fatalf("skip not reported on the next turn: %s", dump(r))
	}
	if ev := ts.events("c", 0, 0, "variables_skipped"); len(ev) != 1 {
		t.Fatalf("want exactly one variables_skipped event: %s", dump(ev))
	}
	cps := must(t, 200, "checkpoints", func(ctx context.Context) ([]client.CheckpointInfo, error) { return ts.c.Checkpoints(ctx, "c") })
	if len(cps) < 3 || cps[0].Turn != 3 || !contains(cps[0].Variables, "b") {
		t.Fatalf("list: %s", dump(cps))
	}
	first := r1.Checkpoint.ID
	must(t, 200, "restore", func(ctx context.Context) (*client.RestoreResult, error) {
		_, res, err := ts.c.RestoreCheckpoint(ctx, "c", first)
		return res, err
	})
	r := ts.run("c", "print(a, 'b' in dir(), open('v.txt').read(), __import__('os').path.exists('new.txt'))")
	if r.Stdout != "1 False one False\n" {
		t.Fatalf("restore to turn 1: %s", dump(r))
	}
	// Survives a crash after the restore too: the restored state is the newest checkpoint.
	ts = ts.restart()
	if r := ts.run("c", "a"); resultOf(r) != "1" {
		t.Fatalf("after restart: %s", dump(r))
	}
}

// skipped says whether a variable of that name is in a checkpoint's skip list.
func skipped(list []client.VarSkip, name string) bool {
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}

// TestMetricsAndHealth: /healthz needs no token; /metrics is Prometheus text.
func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	mustDo(t, 200, "healthz without a token", newClient(ts.base, "").Health)
	ts.newSession(client.CreateRequest{SessionID: "m"})
	ts.run("m", "1")
	if m := ts.metrics(); !strings.Contains(m, "carryover_runs_total{status=\"ok\"}") {
		t.Fatalf("metrics: %.400s", m)
	}
}

// TestSessionDeleteRemovesEverything: DELETE stops the kernel and removes rows and files.
func TestSessionDeleteRemovesEverything(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "gone"})
	ts.run("gone", "x = 1\nopen('f.txt','w').write('y')")
	mustDo(t, 204, "delete", func(ctx context.Context) error { return ts.c.DeleteSession(ctx, "gone") })
	errCode(t, errOf(ts.c.GetSession(ts.ctx(), "gone")), 404, "not_found")
	errCode(t, errOf(ts.c.Events(ts.ctx(), "gone", 0, 0, "")), 404, "not_found")
	if fileExists(ts.dir + "/workspaces/gone") {
		t.Fatal("workspace left behind")
	}
	// The id can be reused and starts empty.
	ts.newSession(client.CreateRequest{SessionID: "gone"})
	if r := ts.run("gone", "'x' in dir()"); resultOf(r) != "False" {
		t.Fatalf("%s", dump(r))
	}
	l := must(t, 200, "checkpoints", func(ctx context.Context) ([]client.CheckpointInfo, error) { return ts.c.Checkpoints(ctx, "gone") })
	if len(l) != 1 {
		t.Fatalf("old checkpoints survived: %s", dump(l))
	}
}

// TestDeleteDuringRun: deleting a session while it runs interrupts the run, which answers 404
// not_found with its output so far (not the interrupted cell's error and a checkpoint deleted with
// the session), and neither the run nor a queued one brings a kernel or a workspace back for the
// deleted session.
func TestDeleteDuringRun(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "del"})
	ts.run("del", "x = 1")
	first := ts.goRun("del", client.RunRequest{Code: "print('started', flush=True)\nimport time\nwhile True: time.sleep(0.05)"})
	ts.waitOutput(t, "del", "started")
	queued := ts.goRun("del", client.RunRequest{Code: "y = 2"})
	time.Sleep(200 * time.Millisecond)
	mustDo(t, 204, "delete", func(ctx context.Context) error { return ts.c.DeleteSession(ctx, "del") })
	for i, ch := range []<-chan runAnswer{first, queued} {
		select {
		case r := <-ch:
			errCode(t, r.err, 404, "not_found")
			if i == 0 && (r.res == nil || r.res.Stdout != "started\n" || r.res.Checkpoint != nil) {
				t.Errorf("the deleted run's answer: %s", dump(r.res))
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a run hung after delete")
		}
	}
	time.Sleep(300 * time.Millisecond)
	if fileExists(ts.dir + "/workspaces/del") {
		t.Fatal("workspace of the deleted session is back")
	}
	errCode(t, errOf(ts.c.GetSession(ts.ctx(), "del")), 404, "not_found")
	if n := len(ts.srv.Svc.List()); n != 0 {
		t.Fatalf("%d sessions remain", n)
	}
}

// TestBadEnvAndCursor: an env var name no process can have and a completion cursor outside the code
// are the caller's mistakes (400 with the field), not a 500 from the kernel or a request that never
// answers; the session is unchanged and keeps working.
func TestBadEnvAndCursor(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "be", Start: true})
	ctx := ts.ctx()
	_, err := ts.c.Run(ctx, "be", client.RunRequest{Code: "x = 1", Env: map[string]string{"A=B": "x"}})
	errCode(t, err, 400, "invalid_request")
	_, err = ts.c.Exec(ctx, "be", client.ExecRequest{Command: "true", Env: map[string]string{"": "x"}})
	errCode(t, err, 400, "invalid_request")
	for _, cur := range []int{-1, 6} {
		start := time.Now()
		_, err = ts.c.Complete(ctx, "be", "print", cur)
		errCode(t, err, 400, "invalid_request")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cursor %d: answered after %v", cur, d)
		}
	}
	if c, err := ts.c.Complete(ctx, "be", "prin", 4); err != nil || len(c.Matches) == 0 {
		t.Errorf("complete at the end: %+v %v", c, err)
	}
	if r := ts.run("be", "print(x if 'x' in dir() else 'unset')"); strings.TrimSpace(r.Stdout) != "unset" || r.ExecutionCount != 1 {
		t.Errorf("after refused requests: %+v", r)
	}
}

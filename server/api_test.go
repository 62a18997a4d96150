package server_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestFilesAPI: PUT, POST (utf-8 and base64), list, GET, DELETE, and files written by code.
func TestFilesAPI(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "f"})
	ts.must(201, "PUT", "/api/sessions/f/files/data/in.csv", "a,b\n1,2\n")
	ts.must(201, "POST", "/api/sessions/f/files", map[string]any{"path": "/workspace/bin/blob", "content": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "encoding": "base64"})
	r := ts.run("f", "import csv\nrows = list(csv.reader(open('data/in.csv')))\nprint(rows, list(open('bin/blob','rb').read()))\nopen('out/result.txt','w') if False else None\nimport os\nos.makedirs('out', exist_ok=True)\nopen('out/result.txt','w').write('done')")
	if !strings.HasPrefix(r.str("stdout"), "[['a', 'b'], ['1', '2']] [0, 1, 2, 255]") {
		t.Fatalf("code could not read uploads: %s", r.Body)
	}
	l := ts.must(200, "GET", "/api/sessions/f/files", nil)
	var paths []string
	for _, f := range l.get("files").([]any) {
		paths = append(paths, f.(map[string]any)["path"].(string))
	}
	if strings.Join(paths, ",") != "bin/blob,data/in.csv,out/result.txt" {
		t.Fatalf("list: %v", paths)
	}
	if g := ts.must(200, "GET", "/api/sessions/f/files/out/result.txt", nil); string(g.Body) != "done" {
		t.Fatalf("get: %q", g.Body)
	}
	if g := ts.must(200, "GET", "/api/sessions/f/files/%2Fworkspace%2Fdata%2Fin.csv", nil); string(g.Body) != "a,b\n1,2\n" {
		t.Fatalf("get by /workspace path: %q", g.Body)
	}
	ts.must(204, "DELETE", "/api/sessions/f/files/data/in.csv", nil)
	errCode(t, ts.do("GET", "/api/sessions/f/files/data/in.csv", nil), 404, "not_found")
	if r := ts.run("f", "import os\nos.path.exists('data/in.csv')"); r.str("result") != "False" {
		t.Fatalf("%s", r.Body)
	}
}

// TestCheckpointsListAndRestore: each turn is a checkpoint; restoring one brings back that turn's
// namespace and files; skipped variables are reported in the answer and as an event.
func TestCheckpointsListAndRestore(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "c"})
	r1 := ts.run("c", "a = 1\nopen('v.txt','w').write('one')")
	if r1.str("checkpoint", "id") == "" || !strings.Contains(r1.str("checkpoint", "saved"), "a") {
		t.Fatalf("no checkpoint in answer: %s", r1.Body)
	}
	r2 := ts.run("c", "a = 2\nb = 3\ngen = (i for i in range(3))\nopen('v.txt','w').write('two')\nopen('new.txt','w').write('x')")
	sk := r2.get("checkpoint", "skipped").([]any)
	if len(sk) != 1 || sk[0].(map[string]any)["name"] != "gen" || sk[0].(map[string]any)["reason"] == "" {
		t.Fatalf("generator not reported: %s", r2.Body)
	}
	// Reported in every answer while it lasts, but one event for as long as the list is unchanged.
	if r := ts.run("c", "c2 = 1"); !strings.Contains(r.str("checkpoint", "skipped"), "gen") {
		t.Fatalf("skip not reported on the next turn: %s", r.Body)
	}
	if ev := ts.must(200, "GET", "/api/sessions/c/events?event_type=variables_skipped", nil); len(ev.get("events").([]any)) != 1 {
		t.Fatalf("want exactly one variables_skipped event: %s", ev.Body)
	}
	l := ts.must(200, "GET", "/api/sessions/c/checkpoints", nil)
	cps := l.get("checkpoints").([]any)
	if len(cps) < 3 || l.str("checkpoints", "0", "turn") != "3" || !strings.Contains(l.str("checkpoints", "0", "variables"), "b") {
		t.Fatalf("list: %s", l.Body)
	}
	first := r1.str("checkpoint", "id")
	ts.must(200, "POST", "/api/sessions/c/checkpoints/"+first+"/restore", nil)
	r := ts.run("c", "print(a, 'b' in dir(), open('v.txt').read(), __import__('os').path.exists('new.txt'))")
	if r.str("stdout") != "1 False one False\n" {
		t.Fatalf("restore to turn 1: %s", r.Body)
	}
	// Survives a crash after the restore too: the restored state is the newest checkpoint.
	ts = ts.restart()
	if r := ts.run("c", "a"); r.str("result") != "1" {
		t.Fatalf("after restart: %s", r.Body)
	}
}

// TestMetricsAndHealth: /healthz needs no token; /metrics is Prometheus text.
func TestMetricsAndHealth(t *testing.T) {
	ts := startServer(t, "")
	if r := ts.do("GET", "/healthz", nil, "Authorization", ""); r.Status != 200 || r.str("status") != "ok" {
		t.Fatalf("healthz: %d %s", r.Status, r.Body)
	}
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "m"})
	ts.run("m", "1")
	r := ts.must(200, "GET", "/metrics", nil)
	if !strings.Contains(string(r.Body), "carryover_runs_total{status=\"ok\"}") {
		t.Fatalf("metrics: %.400s", r.Body)
	}
}

// TestSessionDeleteRemovesEverything: DELETE stops the kernel and removes rows and files.
func TestSessionDeleteRemovesEverything(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "gone"})
	ts.run("gone", "x = 1\nopen('f.txt','w').write('y')")
	ts.must(204, "DELETE", "/api/sessions/gone", nil)
	errCode(t, ts.do("GET", "/api/sessions/gone", nil), 404, "not_found")
	errCode(t, ts.do("GET", "/api/sessions/gone/events", nil), 404, "not_found")
	if fileExists(ts.dir + "/workspaces/gone") {
		t.Fatal("workspace left behind")
	}
	// The id can be reused and starts empty.
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "gone"})
	if r := ts.run("gone", "'x' in dir()"); r.str("result") != "False" {
		t.Fatalf("%s", r.Body)
	}
	if l := ts.must(200, "GET", "/api/sessions/gone/checkpoints", nil); len(l.get("checkpoints").([]any)) != 1 {
		t.Fatalf("old checkpoints survived: %s", l.Body)
	}
}

// TestDeleteDuringRun: deleting a session while it runs interrupts the run, and neither the run nor
// a queued one brings a kernel or a workspace back for the deleted session.
func TestDeleteDuringRun(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "del"})
	ts.run("del", "x = 1")
	running := make(chan resp, 2)
	go func() {
		running <- ts.do("POST", "/api/sessions/del/run", map[string]any{"code": "import time\nwhile True: time.sleep(0.05)"})
	}()
	time.Sleep(400 * time.Millisecond)
	go func() { running <- ts.do("POST", "/api/sessions/del/run", map[string]any{"code": "y = 2"}) }()
	time.Sleep(200 * time.Millisecond)
	ts.must(204, "DELETE", "/api/sessions/del", nil)
	for i := 0; i < 2; i++ {
		select {
		case <-running:
		case <-time.After(30 * time.Second):
			t.Fatal("a run hung after delete")
		}
	}
	time.Sleep(300 * time.Millisecond)
	if fileExists(ts.dir + "/workspaces/del") {
		t.Fatal("workspace of the deleted session is back")
	}
	errCode(t, ts.do("GET", "/api/sessions/del", nil), 404, "not_found")
	if n := len(ts.srv.Svc.List()); n != 0 {
		t.Fatalf("%d sessions remain", n)
	}
}

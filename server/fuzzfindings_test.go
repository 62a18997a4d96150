package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// TestFuzzFindings pins what TestFuzzAPI found: each request once answered 500 or an error outside
// the API's shape, and now answers 400 invalid_request.
func TestFuzzFindings(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "ff"})
	if _, err := ts.c.PutFile(ts.ctx(), "ff", "dir/file.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("Ω", 200) // 400 bytes: over NAME_MAX
	cases := []struct {
		name         string
		method, path string
		body         string
	}{
		// mkdirat: ENAMETOOLONG was a 500.
		{"exec in a working_dir with a name too long", "POST", "/api/sessions/ff/exec", `{"command": "true", "working_dir": "` + long + `"}`},
		// MkdirAll under a file: ENOTDIR was a 500.
		{"exec in a working_dir under a file", "POST", "/api/sessions/ff/exec", `{"command": "true", "working_dir": "dir/file.txt/sub"}`},
		{"PUT a file under a file", "PUT", "/api/sessions/ff/files/dir/file.txt/under", "x"},
		{"POST a file under a file", "POST", "/api/sessions/ff/files", `{"path": "dir/file.txt/under", "content": "x"}`},
		// open: ENAMETOOLONG was a 500.
		{"PUT a file with a name too long", "PUT", "/api/sessions/ff/files/" + long, "x"},
		{"GET a file with a name too long", "GET", "/api/sessions/ff/files/" + long, ""},
		{"DELETE a file with a name too long", "DELETE", "/api/sessions/ff/files/" + long, ""},
		// rename over a directory: EISDIR/EEXIST was a 500.
		{"PUT a file over a directory", "PUT", "/api/sessions/ff/files/dir", "x"},
		{"GET a file under a file", "GET", "/api/sessions/ff/files/dir/file.txt/under", ""},
		// gorilla's plain-text "Bad Request" for a GET that is not a websocket handshake.
		{"websocket without a handshake", "GET", "/api/sessions/ff/ws", ""},
		// Code with a NUL byte: the kernel never answered, the run hung for its whole timeout.
		{"run code with NUL", "POST", "/api/sessions/ff/run", `{"code": "1+1 # \u0000"}`},
		{"execute code with NUL", "POST", "/api/execute", `{"code": "a\u0000b"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errCode(t, rawWithin(t, ts, c.method, c.path, c.body).err(), 400, "invalid_request")
		})
	}
	// The websocket's run frame goes the same way.
	conn := ts.ws(t, "ff")
	if err := conn.Send(ts.ctx(), client.RunFrame{ID: "nul", Code: "\x00"}); err != nil {
		t.Fatal(err)
	}
	if f := readUntil(t, conn, "error", "nul"); f[len(f)-1].Error == nil || f[len(f)-1].Error.Code != "invalid_request" {
		t.Errorf("run frame with NUL: %s", f[len(f)-1].Raw)
	}
	// A NUL escaped inside a string literal is fine.
	if r := ts.run("ff", `'a\x00b'`); resultOf(r) != `'a\x00b'` {
		t.Errorf("escaped NUL: %s", dump(r))
	}
	if got := ts.getFile("ff", "dir/file.txt"); string(got) != "x" {
		t.Errorf("dir/file.txt is %q after the refused requests", got)
	}
}

// rawWithin is ts.raw with a deadline: a request that hangs fails the test instead of stalling it.
func rawWithin(t *testing.T, ts *testServer, method, path, body string) rawResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResp{Status: res.StatusCode, Body: data}
}

// TestFuzzFindingsInterrupted: an interrupted run's answer matches RunResult. Its error output, a
// KeyboardInterrupt, had no "evalue" (it is empty, and omitted), which Output requires; the fuzz
// saw it in a websocket result after its interrupt frame.
func TestFuzzFindingsInterrupted(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "fi"})
	ts.run("fi", "1+1")
	f := newFuzzer(t, ts, 1, t.TempDir())
	conn, err := ts.c.Connect(t.Context(), "fi") // to see the run's output: then it is in the kernel
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan []byte, 1)
	go func() {
		_, _, b, err := f.send("run", "POST", "/api/sessions/fi/run", nil, []byte(`{"code": "import time; print('started', flush=True); time.sleep(20)"}`))
		if err != nil {
			t.Errorf("run: %v", err)
		}
		done <- b
	}()
	for {
		if fr := readFrame(t, conn, 60*time.Second); fr.Type == client.FrameOutput && fr.Output != nil && strings.Contains(fr.Output.Text, "started") {
			break
		}
	}
	if st, _, b, err := f.send("interrupt", "POST", "/api/sessions/fi/interrupt", nil, nil); err != nil || st != 200 {
		t.Fatalf("interrupt: %d %v %s", st, err, b)
	}
	b := <-done
	if !strings.Contains(string(b), "KeyboardInterrupt") {
		t.Fatalf("the run was not interrupted: %s", b)
	}
	if err := f.ac.validate("#/components/schemas/RunResult", b); err != nil {
		t.Errorf("interrupted run's answer: %v\n%s", err, b)
	}
}

// TestFuzzFindingsHugeCompletion: completing in 100 KiB of code answers (the kernel gets a window
// around the cursor), and the session's kernel is free afterwards. It once took the kernel over
// 10 s (504 timeout) while every later request of the session (PATCH context...) waited behind it.
func TestFuzzFindingsHugeCompletion(t *testing.T) {
	// Not parallel: its bound on the completions' wall time needs the CPU they would get alone.
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "fc"})
	ts.run("fc", "import os\nvalue_one = 1")
	code := strings.Repeat("Ω", 100<<10)
	start := time.Now()
	r := rawWithin(t, ts, "POST", "/api/sessions/fc/complete", `{"code": "`+code+`"}`)
	if r.Status != 200 {
		t.Fatalf("complete in 100 KiB: %d %s", r.Status, clip(r.Body))
	}
	// The window keeps what matters: a name completes, with offsets in the whole code.
	long := strings.Repeat("#"+strings.Repeat("x", 100)+"\n", 200) + "value_o"
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rep, err := ts.c.Complete(ctx, "fc", long, len([]rune(long)))
	if err != nil || !contains(rep.Matches, "value_one") || rep.CursorStart != len([]rune(long))-len("value_o") || rep.CursorEnd != len([]rune(long)) {
		t.Fatalf("complete at the end of %d characters: %v %s", len(long), err, dump(rep))
	}
	if r := rawWithin(t, ts, "PATCH", "/api/sessions/fc/context", `{"working_dir": "/workspace"}`); r.Status != 200 {
		t.Fatalf("PATCH context after the completions: %d %s", r.Status, clip(r.Body))
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the completions and the PATCH took %s", d)
	}
}

// TestFuzzFindingsContext: a working_dir the kernel cannot enter is refused before it is saved. It
// was saved, the kernel's chdir failed (500), and every later PATCH of the context re-applied it
// and answered 500 too.
func TestFuzzFindingsContext(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "fx"})
	ts.run("fx", "1+1")
	if _, err := ts.c.PutFile(ts.ctx(), "fx", "afile", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, wd := range []string{strings.Repeat("Ω", 300), "afile/sub"} {
		errCode(t, rawWithin(t, ts, "PATCH", "/api/sessions/fx/context", `{"working_dir": "`+wd+`"}`).err(), 400, "invalid_request")
	}
	if r := rawWithin(t, ts, "PATCH", "/api/sessions/fx/context", `{"env_vars": {"A": "1"}}`); r.Status != 200 {
		t.Fatalf("PATCH context after the refused ones: %d %s", r.Status, clip(r.Body))
	}
	if s := ts.session("fx"); s.AgentContext.WorkingDir != "/workspace" {
		t.Errorf("working_dir is %q", s.AgentContext.WorkingDir)
	}
	if r := ts.run("fx", "import os; os.getcwd(), os.environ['A']"); !strings.HasSuffix(resultOf(r), "/fx', '1')") {
		t.Errorf("kernel after the refused contexts: %s", dump(r))
	}
}

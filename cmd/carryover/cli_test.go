package main

// The CLI's tests run the cobra command tree in-process (execute, with captured stdin, stdout and
// stderr) against one in-process server: no sandbox, a warm pool of one kernel, a token. The
// connection comes from CARRYOVER_URL and CARRYOVER_TOKEN, set by TestMain.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

const cliTestToken = "cli-test-token"

var cliBase string // the test server's http://host:port

func TestMain(m *testing.M) {
	os.Exit(cliMain(m))
}

func cliMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "carryover-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := servertest.New(servertest.Config(dir, cliTestToken), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	cliBase = srv.Base
	os.Setenv("CARRYOVER_URL", cliBase)
	os.Setenv("CARRYOVER_TOKEN", cliTestToken)
	return m.Run()
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// carry runs `carryover args...` in-process with stdin.
func carry(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var out, errb servertest.SyncBuffer
	code := execute(ctx, args, strings.NewReader(stdin), &out, &errb)
	return cliResult{out.String(), errb.String(), code}
}

// must runs a command that must exit 0.
func must(t *testing.T, args ...string) cliResult {
	t.Helper()
	r := carry(t, "", args...)
	if r.code != 0 {
		t.Fatalf("carryover %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// sessionID is a fresh session id for the test; the session is deleted at the end.
func sessionID(t *testing.T) string {
	id := servertest.ID(t)
	t.Cleanup(func() { carry(t, "", "sessions", "rm", id) })
	return id
}

func TestCLIRun(t *testing.T) {
	id := sessionID(t)
	r := must(t, "run", "-s", id, "-c", "x = 1") // creates the session
	if r.stdout != "" || !strings.Contains(r.stderr, "checkpoint ") || !strings.Contains(r.stderr, "saved [x]") {
		t.Fatalf("first run: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if r := must(t, "run", "-s", id, "-c", "print(x + 1)\nx * 10"); r.stdout != "2\n10\n" {
		t.Fatalf("second run stdout %q", r.stdout)
	}
	if r := carry(t, "import sys\nprint('from stdin', x, file=sys.stderr)", "run", "-s", id); r.code != 0 || !strings.HasPrefix(r.stderr, "from stdin 1\n") {
		t.Fatalf("stdin run: %+v", r)
	}
	if r := carry(t, "print('dash')", "run", "-s", id, "-"); r.code != 0 || r.stdout != "dash\n" {
		t.Fatalf("stdin (-) run: %+v", r)
	}
	script := filepath.Join(t.TempDir(), "script.py")
	if err := os.WriteFile(script, []byte("y = x + 41\nprint('y is', y)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := must(t, "run", "-s", id, script); r.stdout != "y is 42\n" || !strings.Contains(r.stderr, "saved [y]") {
		t.Fatalf("script run: %+v", r)
	}
	r = carry(t, "", "run", "-s", id, "-c", "def f():\n    return 1/0\nf()")
	if r.code != 1 || !strings.Contains(r.stderr, "ZeroDivisionError") || !strings.Contains(r.stderr, "return 1/0") || strings.Contains(r.stderr, "\x1b[") {
		t.Fatalf("Python error: %+v", r)
	}
	// The session kept everything, and the URL flag overrides the environment's.
	r = carry(t, "", "run", "-s", id, "--url", "http://127.0.0.1:1", "-c", "x")
	if r.code != 2 {
		t.Fatalf("unreachable --url: %+v", r)
	}
	if r := must(t, "run", "-s", id, "--url", cliBase, "-c", "x, y"); r.stdout != "(1, 42)\n" {
		t.Fatalf("--url run: %+v", r)
	}
}

// TestCLIRunInput: input() reads stdin's lines, the last one without its newline too, then raises
// EOFError at its end, as Python's does (it got empty lines forever before); with the code on
// stdin, input() gets EOFError at once.
func TestCLIRunInput(t *testing.T) {
	id := sessionID(t)
	code := "lines = []\nwhile True:\n    try:\n        lines.append(input())\n    except EOFError:\n        break\nprint(lines)"
	if r := carry(t, "a\nb\nc", "run", "-s", id, "-c", code); r.code != 0 || r.stdout != "['a', 'b', 'c']\n" {
		t.Fatalf("piped lines: %+v", r)
	}
	r := carry(t, "input('name? ')", "run", "-s", id)
	if r.code != 1 || !strings.Contains(r.stderr, "EOFError") || !strings.Contains(r.stderr, "stdin held the code") {
		t.Fatalf("code on stdin: %+v", r)
	}
}

func TestCLIRunAPIError(t *testing.T) {
	r := carry(t, "", "run", "-s", "not a valid id!", "-c", "1")
	if r.code != 2 || !strings.Contains(r.stderr, "invalid_request") {
		t.Fatalf("bad id: %+v", r)
	}
	r = carry(t, "", "run", "-s", "whatever", "--token", "wrong", "-c", "1")
	if r.code != 2 || !strings.Contains(r.stderr, "unauthorized (401)") {
		t.Fatalf("wrong token: %+v", r)
	}
}

func TestCLIRunImageAndJSON(t *testing.T) {
	id := sessionID(t)
	t.Chdir(t.TempDir())
	r := must(t, "run", "-s", id, "-c", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
	name := id + "-1-1.png"
	data, err := os.ReadFile(name)
	if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatalf("image %s: %v (stderr %q)", name, err, r.stderr)
	}
	if !strings.Contains(r.stderr, name) || strings.Contains(r.stdout, "Figure") {
		t.Fatalf("image run: %+v", r)
	}

	r = must(t, "run", "-s", id, "--json", "-c", "print('hi')\n6 * 7")
	var res struct {
		ExecutionCount int     `json:"execution_count"`
		Status         string  `json:"status"`
		Stdout         string  `json:"stdout"`
		Result         *string `json:"result"`
		Checkpoint     *struct {
			ID string `json:"id"`
		} `json:"checkpoint"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json output %q: %v", r.stdout, err)
	}
	if res.ExecutionCount != 2 || res.Status != "ok" || res.Stdout != "hi\n" || res.Result == nil || *res.Result != "42" || res.Checkpoint == nil {
		t.Fatalf("--json answer: %s", r.stdout)
	}
	// --json creates the session too.
	id2 := sessionID(t) + "-json"
	t.Cleanup(func() { carry(t, "", "sessions", "rm", id2) })
	if r := must(t, "run", "-s", id2, "--json", "-c", "'new'"); !strings.Contains(r.stdout, `"result": "'new'"`) {
		t.Fatalf("--json on a new session: %+v", r)
	}
	r = carry(t, "", "run", "-s", id, "--json", "-c", "raise ValueError('no')")
	if r.code != 1 || !json.Valid([]byte(r.stdout)) || !strings.Contains(r.stdout, "ValueError") {
		t.Fatalf("--json error: %+v", r)
	}
}

// TestCLIRunDisplayUpdate: a display's updates are printed (they were dropped: a progress display
// showed its first state only).
func TestCLIRunDisplayUpdate(t *testing.T) {
	id := sessionID(t)
	r := must(t, "run", "-s", id, "-c", "h = display('first', display_id=True)\nh.update('second')")
	if r.stdout != "'first'\n'second'\n" {
		t.Fatalf("display update: %+v", r)
	}
}

// TestCLIRunRestoreReport: the first run after a restart says what the restore put back, what
// replay recomputed and what is lost, with why (the terminal said nothing: a generator a turn that
// deletes files made was gone without a word). The line of background processes ended is not
// here: this server runs unsandboxed, where they are not tracked.
func TestCLIRunRestoreReport(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "import os\ngen = (i for i in range(3))\nif os.path.exists('nothing'):\n    os.remove('nothing')\nx = 1")
	must(t, "run", "-s", id, "-c", "g2 = (i for i in range(3))")
	if _, err := client.New(cliBase, cliTestToken).Restart(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	r := must(t, "run", "-s", id, "-c", "x")
	want := "restored from checkpoint ckpt_"
	if r.stdout != "1\n" || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "(turn 2); recomputed [g2 (replayed turn 2)]") ||
		!strings.Contains(r.stderr, "not restored [gen (generator: not replayed: turn 1 is not safe to run again") {
		t.Fatalf("restore report: %+v", r)
	}
	if r := must(t, "run", "-s", id, "-c", "x"); strings.Contains(r.stderr, want) {
		t.Fatalf("the report is said once: %+v", r)
	}
}

func TestCLIRunProgress(t *testing.T) {
	id := sessionID(t)
	defer func(d time.Duration, f func(any) bool) { progressAfter, stderrTerminal = d, f }(progressAfter, stderrTerminal)
	progressAfter = 100 * time.Millisecond
	stderrTerminal = func(any) bool { return true }
	r := must(t, "run", "-s", id, "-c", "import time\nprint('a', flush=True)\ntime.sleep(0.8)\nprint('b')")
	if r.stdout != "a\nb\n" || !strings.Contains(r.stderr, "["+id+"] running ") || !strings.Contains(r.stderr, "\r\x1b[K") {
		t.Fatalf("progress: %+v", r)
	}
	// Cleared before the checkpoint line, never left behind it.
	if i, j := strings.LastIndex(r.stderr, "running "), strings.Index(r.stderr, "checkpoint "); i > j {
		t.Fatalf("progress line after the checkpoint line: %q", r.stderr)
	}
}

func TestCLISessions(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "a = 1")
	r := must(t, "sessions", "ls")
	if !regexp.MustCompile(`(?m)^ID\s+STATE\s+SANDBOX\s+EXECUTIONS\s+UPDATED$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(id)+`\s+running\s+live\s+1\s+\d{4}-`).MatchString(r.stdout) {
		t.Fatalf("sessions ls:\n%s", r.stdout)
	}
	r = must(t, "sessions", "ls", "--json")
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Sessions) == 0 {
		t.Fatalf("sessions ls --json %q: %v", r.stdout, err)
	}
	r = must(t, "sessions", "show", id)
	if !strings.Contains(r.stdout, "state:") || !strings.Contains(r.stdout, "execution count:  1") {
		t.Fatalf("sessions show:\n%s", r.stdout)
	}
	r = must(t, "sessions", "show", id, "--json")
	var one struct {
		Session struct {
			ID             string `json:"id"`
			ExecutionCount int    `json:"execution_count"`
		} `json:"session"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil || one.Session.ID != id || one.Session.ExecutionCount != 1 {
		t.Fatalf("sessions show --json %q: %v", r.stdout, err)
	}
	r = must(t, "sessions", "usage", id)
	if !strings.Contains(r.stdout, "memory peak:") || !strings.Contains(r.stdout, "in 1 checkpoints") {
		t.Fatalf("sessions usage:\n%s", r.stdout)
	}
	must(t, "sessions", "rm", id)
	r = carry(t, "", "sessions", "show", id)
	if r.code != 2 || !strings.Contains(r.stderr, "not_found (404)") {
		t.Fatalf("show after rm: %+v", r)
	}
}

// TestCLISessionLifecycle: `sessions interrupt|restart|pause|resume|hibernate|stop` act on a
// session from the terminal (only curl could before): an interrupt from another terminal stops a
// run, a paused session refuses runs, a hibernated one wakes with its state.
func TestCLISessionLifecycle(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "x = 1")
	run := make(chan cliResult, 1)
	go func() {
		run <- carry(t, "", "run", "-s", id, "-c", "import time\nopen('started', 'w').close()\ntime.sleep(60)")
	}()
	waitRunning(t, id)
	if r := must(t, "sessions", "interrupt", id); r.stdout != "interrupted "+id+": state running, sandbox live\n" {
		t.Fatalf("interrupt: %+v", r)
	}
	if r := <-run; r.code != 1 || !strings.Contains(r.stderr, "KeyboardInterrupt") {
		t.Fatalf("the interrupted run: %+v", r)
	}
	if r := must(t, "sessions", "restart", id); !strings.HasPrefix(r.stdout, "restarted "+id+": state running") {
		t.Fatalf("restart: %+v", r)
	}
	must(t, "sessions", "pause", id)
	if r := carry(t, "", "run", "-s", id, "-c", "x"); r.code != 2 || !strings.Contains(r.stderr, "session_paused") {
		t.Fatalf("run while paused: %+v", r)
	}
	must(t, "sessions", "resume", id)
	if r := must(t, "sessions", "hibernate", id); !strings.Contains(r.stdout, "sandbox hibernated") {
		t.Fatalf("hibernate: %+v", r)
	}
	if r := must(t, "run", "-s", id, "-c", "x"); r.stdout != "1\n" || !strings.Contains(r.stderr, "restored from checkpoint") {
		t.Fatalf("run after hibernate: %+v", r)
	}
	if r := must(t, "sessions", "stop", id, "--reason", "done here"); !strings.HasPrefix(r.stdout, "stopped "+id+": state completed") {
		t.Fatalf("stop: %+v", r)
	}
	if r := must(t, "sessions", "show", id); !strings.Contains(r.stdout, "done here") {
		t.Fatalf("show after stop: %+v", r)
	}
	if r := carry(t, "", "sessions", "interrupt", id+"-none"); r.code != 2 || !strings.Contains(r.stderr, "not_found (404)") {
		t.Fatalf("interrupt of no session: %+v", r)
	}
}

// waitRunning waits until session id's run has started: its cell made the file "started".
func waitRunning(t *testing.T, id string) {
	t.Helper()
	cl := client.New(cliBase, cliTestToken)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := cl.GetFile(t.Context(), id, "started"); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s: its run did not start", id)
}

func TestCLIExec(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "open('f.txt', 'w').write('hello')")
	r := carry(t, "", "exec", "-s", id, "--", "sh", "-c", "cat f.txt; echo oops >&2; exit 3")
	if r.code != 3 || r.stdout != "hello" || r.stderr != "oops\n" {
		t.Fatalf("exec argv: %+v", r)
	}
	if r := must(t, "exec", "-s", id, "-c", "mkdir -p sub && echo in sub > sub/g.txt"); r.stdout != "" {
		t.Fatalf("exec -c: %+v", r)
	}
	if r := must(t, "exec", "-s", id, "--cwd", "sub", "--", "cat", "g.txt"); r.stdout != "in sub\n" {
		t.Fatalf("exec --cwd: %+v", r)
	}
	r = carry(t, "", "exec", "-s", id, "--json", "-c", "echo j; exit 4")
	var res struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	if r.code != 4 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Stdout != "j\n" || res.ExitCode != 4 {
		t.Fatalf("exec --json: %+v", r)
	}
	// output that is not UTF-8 is written as its bytes (`carryover exec ... 'cat a.png' > a.png`)
	if r := must(t, "exec", "-s", id, "-c", `printf '\211PNG\r\n'; printf 'caf\351' >&2`); r.stdout != "\x89PNG\r\n" || r.stderr != "caf\xe9" {
		t.Fatalf("exec of bytes: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestCLIExecCtrlC: Ctrl-C during `carryover exec` interrupts the session, which kills the command
// (the CLI died and the command ran on to its timeout, holding the session), and the CLI prints
// what it wrote and exits 130.
func TestCLIExecCtrlC(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "pass")
	done := make(chan cliResult, 1)
	go func() { done <- carry(t, "", "exec", "-s", id, "-c", "echo started; sleep 60") }()
	cl := client.New(cliBase, cliTestToken)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// exec_started comes once the command runs, after the CLI watches for Ctrl-C (before its call)
		if evs, err := cl.Events(t.Context(), id, 0, 100, "exec_started"); err == nil && len(evs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != 130 || r.stdout != "started\n" || !strings.Contains(r.stderr, "interrupting the command") {
			t.Fatalf("exec after Ctrl-C: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Ctrl-C did not end the command")
	}
}

func TestCLIFiles(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "pass")
	dir := t.TempDir()
	local := filepath.Join(dir, "data.bin")
	content := []byte("line 1\n\x00\xffbinary\n")
	if err := os.WriteFile(local, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := must(t, "files", "put", "-s", id, local); !strings.Contains(r.stdout, "/workspace/data.bin: 16 bytes") {
		t.Fatalf("files put: %+v", r)
	}
	must(t, "files", "put", "-s", id, local, "/workspace/deep/copy.bin")
	if r := carry(t, "from stdin", "files", "put", "-s", id, "-", "notes.md"); r.code != 0 {
		t.Fatalf("files put -: %+v", r)
	}
	if r := carry(t, "x", "files", "put", "-s", id, "-", "two\nlines.txt"); r.code != 0 {
		t.Fatalf("files put of a name with a newline: %+v", r)
	}
	r := must(t, "files", "ls", "-s", id)
	for _, p := range []string{"data.bin", "deep/copy.bin", "notes.md", `"two\nlines.txt"`} { // quoted: one row
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p) + `\s+\d+\s`).MatchString(r.stdout) {
			t.Fatalf("files ls lacks %s:\n%s", p, r.stdout)
		}
	}
	out := filepath.Join(dir, "back.bin")
	must(t, "files", "get", "-s", id, "deep/copy.bin", "-o", out)
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("files get -o: %q, %v", got, err)
	}
	if r := must(t, "files", "get", "-s", id, "notes.md"); r.stdout != "from stdin" {
		t.Fatalf("files get to stdout: %q", r.stdout)
	}
	if r := must(t, "run", "-s", id, "-c", "print(open('deep/copy.bin', 'rb').read() == open('data.bin', 'rb').read())"); r.stdout != "True\n" {
		t.Fatalf("kernel sees the upload: %+v", r)
	}
	if r := carry(t, "", "files", "get", "-s", id, "missing.txt"); r.code != 2 || !strings.Contains(r.stderr, "not_found") {
		t.Fatalf("files get missing: %+v", r)
	}
}

func TestCLICheckpoints(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "v = 'first'")
	must(t, "run", "-s", id, "-c", "v = 'second'")
	r := must(t, "checkpoints", "ls", "-s", id, "--json")
	var list struct {
		Checkpoints []struct {
			ID   string `json:"id"`
			Turn int    `json:"turn"`
		} `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Checkpoints) < 2 {
		t.Fatalf("checkpoints ls --json %q: %v", r.stdout, err)
	}
	var first string
	for _, cp := range list.Checkpoints {
		if cp.Turn == 1 {
			first = cp.ID
		}
	}
	if first == "" {
		t.Fatalf("no turn 1 checkpoint: %s", r.stdout)
	}
	if r := must(t, "checkpoints", "ls", "-s", id); !strings.Contains(r.stdout, first) || !strings.Contains(r.stdout, "TURN") {
		t.Fatalf("checkpoints ls:\n%s", r.stdout)
	}
	if r := must(t, "checkpoints", "restore", "-s", id, first); !strings.Contains(r.stdout, "restored "+first+" (turn 1)") || !strings.Contains(r.stdout, "v") {
		t.Fatalf("restore: %+v", r)
	}
	if r := must(t, "run", "-s", id, "-c", "print(v)"); r.stdout != "first\n" {
		t.Fatalf("after restore: %+v", r)
	}
}

func TestCLIEvents(t *testing.T) {
	id := sessionID(t)
	must(t, "run", "-s", id, "-c", "z = 1")
	r := must(t, "events", "-s", id)
	if !regexp.MustCompile(`(?m)^1\t\S+ \S+\tsession_started\t`).MatchString(r.stdout) {
		t.Fatalf("events:\n%s", r.stdout)
	}
	r = must(t, "events", "-s", id, "--json", "--after", "1", "--type", "session_started")
	var list struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Events) != 0 {
		t.Fatalf("events --after 1 --type session_started: %q, %v", r.stdout, err)
	}
	r = must(t, "events", "-s", id, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Events) == 0 {
		t.Fatalf("events --json: %q, %v", r.stdout, err)
	}
	last := len(list.Events)
	// --last N: the newest N, oldest of them first, paged back from the end of the log.
	cl := client.New(cliBase, cliTestToken)
	for i := 0; i < 3; i++ {
		if _, err := cl.Heartbeat(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	r = must(t, "events", "-s", id, "--last", "2")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[0], fmt.Sprintf("%d\t", last+2)) || !strings.HasPrefix(lines[1], fmt.Sprintf("%d\t", last+3)) {
		t.Fatalf("events --last 2 of %d:\n%s", last+3, r.stdout)
	}
	r = must(t, "events", "-s", id, "--json", "--last", "1000", "--type", "heartbeat")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Events) != 3 {
		t.Fatalf("events --last 1000 --type heartbeat: %q, %v", r.stdout, err)
	}

	// --follow prints the stored events after --after, then new ones, until its context ends.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errb servertest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"events", "-s", id, "--follow", "--after", fmt.Sprint(last - 1)}, strings.NewReader(""), &out, &errb)
	}()
	waitFor(t, &out, fmt.Sprintf("%d\t", last))
	must(t, "exec", "-s", id, "-c", "true")
	waitFor(t, &out, "exec_completed")
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("events --follow exit %d, stderr %q", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("events --follow did not stop")
	}
	if strings.Contains(out.String(), "session_started") {
		t.Fatalf("--after not honoured:\n%s", out.String())
	}
}

// waitFor waits until w holds s.
func waitFor(t *testing.T, w interface{ String() string }, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(w.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", s, w.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ io.Writer = (*servertest.SyncBuffer)(nil)

func TestCLIForkAndNotebook(t *testing.T) {
	id := sessionID(t)
	fork := id + "-b"
	t.Cleanup(func() { carry(t, "", "sessions", "rm", fork) })
	must(t, "run", "-s", id, "-c", "xs = [1, 2]")
	if r := must(t, "sessions", "fork", id, "--to", fork); !strings.Contains(r.stdout, "forked "+id+" -> "+fork) {
		t.Fatalf("fork: %+v", r)
	}
	must(t, "run", "-s", fork, "-c", "xs.append(3)")
	if r := must(t, "run", "-s", id, "-c", "print(xs)"); strings.TrimSpace(r.stdout) != "[1, 2]" {
		t.Errorf("the source after the fork changed: %q", r.stdout)
	}
	if r := must(t, "run", "-s", fork, "-c", "print(xs)"); strings.TrimSpace(r.stdout) != "[1, 2, 3]" {
		t.Errorf("the fork: %q", r.stdout)
	}
	if r := carry(t, "", "sessions", "fork", "no-such-session"); r.code != 2 || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("fork of an unknown session: %+v", r)
	}
	kids := id + "-k"
	t.Cleanup(func() {
		for i := 1; i <= 3; i++ {
			carry(t, "", "sessions", "rm", fmt.Sprintf("%s-%d", kids, i))
		}
	})
	if r := must(t, "sessions", "fork", id, "--to", kids, "--count", "3"); strings.Count(r.stdout, "forked "+id+" -> "+kids+"-") != 3 ||
		!strings.Contains(r.stdout, kids+"-3\n") {
		t.Errorf("fork --count 3: %+v", r)
	}
	for _, args := range [][]string{{"run", "-s", id, "--timeout", "-5", "-c", "1"}, {"exec", "-s", id, "--timeout", "-5", "-c", "true"}} {
		if r := carry(t, "", args...); r.code != 2 || !strings.Contains(r.stderr, "timeout_seconds") || r.stdout != "" { // it ran with the default
			t.Errorf("%s --timeout -5: %+v", args[0], r)
		}
	}
	for _, n := range []string{"101", "0", "-1"} { // 0 made one fork: the flag's 0 was not sent
		if r := carry(t, "", "sessions", "fork", id, "--count", n); r.code != 2 || !strings.Contains(r.stderr, "invalid_request") || r.stdout != "" {
			t.Errorf("fork --count %s: %+v", n, r)
		}
	}
	out := filepath.Join(t.TempDir(), "nb.ipynb")
	must(t, "sessions", "notebook", id, "-o", out)
	var nb struct {
		NBFormat int `json:"nbformat"`
		Cells    []struct {
			Source any `json:"source"`
		} `json:"cells"`
	}
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &nb) != nil || nb.NBFormat != 4 || len(nb.Cells) != 2 {
		t.Fatalf("notebook %s: %v %s", out, err, b)
	}
}

func TestCLIRunNotebook(t *testing.T) {
	id := sessionID(t)
	nb := filepath.Join(t.TempDir(), "steps.ipynb")
	doc := `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
		{"cell_type": "code", "source": "n = 6", "metadata": {}, "outputs": [], "execution_count": null},
		{"cell_type": "code", "source": "print(n * 7)", "metadata": {}, "outputs": [], "execution_count": null},
		{"cell_type": "code", "source": "n / 0", "metadata": {}, "outputs": [], "execution_count": null},
		{"cell_type": "code", "source": "print('after')", "metadata": {}, "outputs": [], "execution_count": null}]}`
	if err := os.WriteFile(nb, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := carry(t, "", "run", "-s", id, nb)
	if r.code != 1 || r.stdout != "42\n" || !strings.Contains(r.stderr, "ZeroDivisionError") || !strings.Contains(r.stderr, "stopped at cell 2") {
		t.Fatalf("notebook run: %+v", r)
	}
	r = carry(t, "", "run", "-s", id, "--continue-on-error", nb)
	if r.code != 1 || r.stdout != "42\nafter\n" {
		t.Fatalf("notebook run, continue on error: %+v", r)
	}
}

func TestCLIExportImport(t *testing.T) {
	id := sessionID(t)
	moved := id + "-imported"
	t.Cleanup(func() { carry(t, "", "sessions", "rm", moved) })
	must(t, "run", "-s", id, "-c", "ys = {'a': [1, 2]}\nopen('note.txt', 'w').write('hi')")
	arch := filepath.Join(t.TempDir(), "s.carryover.tar")
	must(t, "sessions", "export", id, "-o", arch)
	if r := must(t, "sessions", "import", arch, "--to", moved); !strings.Contains(r.stdout, "imported "+moved+" (from "+id) {
		t.Fatalf("import: %+v", r)
	}
	if r := must(t, "run", "-s", moved, "-c", "print(ys, open('note.txt').read())"); strings.TrimSpace(r.stdout) != "{'a': [1, 2]} hi" {
		t.Errorf("the imported session: %q", r.stdout)
	}
	bad := filepath.Join(t.TempDir(), "bad.tar")
	b, _ := os.ReadFile(arch)
	if err := os.WriteFile(bad, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if r := carry(t, "", "sessions", "import", bad); r.code != 2 || !strings.Contains(r.stderr, "archive refused: the archive ends inside") {
		t.Errorf("a truncated archive: %+v", r)
	}
}

// TestCLIExportDir: exporting again into the directory of an earlier export writes only the chunks
// that changed, and the directory imports as the archive it holds (its events too, with --events).
func TestCLIExportDir(t *testing.T) {
	id := sessionID(t)
	moved := id + "-fromdir"
	t.Cleanup(func() { carry(t, "", "sessions", "rm", moved) })
	must(t, "run", "-s", id, "-c", "import os\nbig = os.urandom(3 << 20)\nsmall = 1")
	dir := filepath.Join(t.TempDir(), "arch")
	first := must(t, "sessions", "export", id, "--dir", dir)
	if !strings.Contains(first.stderr, " 0 unchanged") {
		t.Fatalf("first export: %+v", first)
	}
	if r := must(t, "sessions", "export", id, "--dir", dir); !strings.Contains(r.stderr, ": 0 chunks written") {
		t.Fatalf("an unchanged session exported again: %+v", r)
	}
	must(t, "run", "-s", id, "-c", "small = 2")
	r := must(t, "sessions", "export", id, "--dir", dir)
	var written, size int
	if _, err := fmt.Sscanf(r.stderr[strings.Index(r.stderr, ": ")+2:], "%d chunks written (%d bytes)", &written, &size); err != nil || written == 0 || size > 1<<20 {
		t.Fatalf("after one small change: %+v (%d chunks, %d bytes)", r, written, size)
	}
	// With its events: the directory keeps them, and packs them back into the archive it imports as.
	must(t, "sessions", "export", id, "--dir", dir, "--events")
	if b, err := os.ReadFile(filepath.Join(dir, "carryover", "events.jsonl")); err != nil || !bytes.Contains(b, []byte(`"event_type"`)) {
		t.Fatalf("the directory's events: %v %q", err, b)
	}
	must(t, "sessions", "import", dir, "--to", moved)
	if r := must(t, "run", "-s", moved, "-c", "print(small, len(big))"); strings.TrimSpace(r.stdout) != "2 3145728" {
		t.Errorf("imported from the directory: %q", r.stdout)
	}
}

package kernel

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLiveKernel runs the protocol behaviours against one real ipykernel per transport.
func TestLiveKernel(t *testing.T) {
	for _, transport := range []string{"ipc", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			k := startKernel(t, testOptions(t, transport))
			if info := k.Info(); info.ProtocolVersion == "" || info.LanguageInfo.Name != "python" || info.Implementation != "ipython" {
				t.Errorf("kernel info = %+v", info)
			}
			if k.Connection().Transport != transport {
				t.Errorf("transport %q", k.Connection().Transport)
			}
			t.Run("Expression", func(t *testing.T) { testExpression(t, k) })
			t.Run("StreamOrder", func(t *testing.T) { testStreamOrder(t, k) })
			t.Run("Error", func(t *testing.T) { testError(t, k) })
			t.Run("Input", func(t *testing.T) { testInput(t, k) })
			t.Run("SilentAndUserExpressions", func(t *testing.T) { testSilent(t, k) })
			t.Run("DisplayUpdateAndClear", func(t *testing.T) { testDisplay(t, k) })
			t.Run("CompleteInspect", func(t *testing.T) { testCompleteInspect(t, k) })
			t.Run("BadSignature", func(t *testing.T) { testBadSignature(t, k) })
			t.Run("ControlledEnv", func(t *testing.T) { testEnv(t, k) })
			t.Run("CancelAndSerialise", func(t *testing.T) { testCancel(t, k) })
			t.Run("Stats", func(t *testing.T) { testStats(t, k) })
			t.Run("LargeAndManyOutputs", func(t *testing.T) { testLargeOutputs(t, k) })
			if transport == "tcp" {
				t.Run("TCPNoDelay", func(t *testing.T) { testTCPNoDelay(t, k) })
			}
			if transport == "ipc" { // the slow import, once
				t.Run("MatplotlibPNG", func(t *testing.T) { testMatplotlib(t, k) })
			}
		})
	}
}

func testExpression(t *testing.T, k *Kernel) {
	r := mustRun(t, k, "1+1")
	if got := plain(t, r); got != "2" {
		t.Errorf("1+1 = %q", got)
	}
	if r.res.ExecutionCount < 1 || r.find("execute_result").ExecutionCount != r.res.ExecutionCount {
		t.Errorf("execution counts: reply %d, result %+v", r.res.ExecutionCount, r.find("execute_result"))
	}
	if len(r.statuses) != 2 || r.statuses[0] != "busy" || r.statuses[1] != "idle" {
		t.Errorf("statuses = %v, want [busy idle]", r.statuses)
	}
	if !r.res.Finished.After(r.res.Started) {
		t.Errorf("timing %v .. %v", r.res.Started, r.res.Finished)
	}
	// The output item's JSON is the API's: forwardable untouched.
	b, _ := json.Marshal(r.find("execute_result"))
	if !bytes.Contains(b, []byte(`"type":"execute_result"`)) || !bytes.Contains(b, []byte(`"data":{"text/plain":"2"}`)) {
		t.Errorf("output JSON %s", b)
	}
	// State persists between executes.
	mustRun(t, k, "x = 20")
	if got := plain(t, mustRun(t, k, "x + 22")); got != "42" {
		t.Errorf("x + 22 = %q", got)
	}
}

func testStreamOrder(t *testing.T, k *Kernel) {
	code := `import sys, time
for i in range(4):
    print(f"out{i}", flush=True)
    time.sleep(0.05)
    print(f"err{i}", file=sys.stderr, flush=True)
    time.sleep(0.05)
`
	start := time.Now()
	var firstAt time.Duration
	r := run(t, k, code, ExecOptions{OnOutput: func(Output) {
		if firstAt == 0 {
			firstAt = time.Since(start)
		}
	}})
	total := time.Since(start)
	if r.err != nil || r.res.Status != "ok" {
		t.Fatalf("execute: %v %+v", r.err, r.res)
	}
	// ipykernel may split one print across two stream messages: a flush timer
	// scheduled by an earlier write can fire between print's writes of the text
	// and of its "\n". Frontends merge adjacent outputs of one stream, so the
	// test does too, and asserts the merged runs.
	var runs []Output
	for _, o := range r.outputs {
		if o.Type != "stream" {
			t.Errorf("unexpected output %+v", o)
			continue
		}
		if n := len(runs); n > 0 && runs[n-1].Name == o.Name {
			runs[n-1].Text += o.Text
			continue
		}
		runs = append(runs, o)
	}
	var got strings.Builder
	for _, o := range runs {
		for _, line := range strings.SplitAfter(o.Text, "\n") {
			if line != "" && !strings.HasPrefix(line, o.Name[3:]) { // "out" lines on stdout, "err" lines on stderr
				t.Errorf("%q arrived on %s", line, o.Name)
			}
		}
		got.WriteString(o.Text)
	}
	want := "out0\nerr0\nout1\nerr1\nout2\nerr2\nout3\nerr3\n"
	if got.String() != want || len(runs) != 8 {
		t.Errorf("stream order: %d runs\n got %q\nwant %q", len(runs), got.String(), want)
	}
	// Streamed as they happen, not batched at the end.
	if total-firstAt < 200*time.Millisecond {
		t.Errorf("first output came %v after start, execute took %v: not streamed", firstAt, total)
	}
}

func testError(t *testing.T, k *Kernel) {
	r := run(t, k, "def f():\n    return 1/0\nf()", ExecOptions{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Status != "error" || r.res.EName != "ZeroDivisionError" || !strings.Contains(r.res.EValue, "division by zero") {
		t.Errorf("result = %+v", r.res)
	}
	if len(r.res.Traceback) == 0 {
		t.Error("no traceback in the reply")
	}
	e := r.find("error")
	if e == nil || e.EName != "ZeroDivisionError" || !strings.Contains(stripANSI(strings.Join(e.Traceback, "\n")), "----> 3 f()") {
		t.Errorf("error output = %+v", e)
	}
	// The kernel is still usable.
	if got := plain(t, mustRun(t, k, "'still' + ' alive'")); got != "'still alive'" {
		t.Errorf("after error: %q", got)
	}
}

func testInput(t *testing.T, k *Kernel) {
	var (
		mu      sync.Mutex // OnInput runs on its own goroutine
		prompts []string
	)
	r := run(t, k, `name = input("Name? ")
print("hello " + name)
import getpass
pw = getpass.getpass("Secret: ")
print(len(pw))`, ExecOptions{OnInput: func(ctx context.Context, req InputRequest) (string, error) {
		mu.Lock()
		prompts = append(prompts, req.Prompt)
		mu.Unlock()
		if req.Password {
			return "hunter2", nil
		}
		return "carry", nil
	}})
	if r.err != nil || r.res.Status != "ok" {
		t.Fatalf("execute: %v %+v", r.err, r.res)
	}
	if got := r.text(""); !strings.Contains(got, "hello carry\n") || !strings.Contains(got, "7\n") {
		t.Errorf("stdout = %q", got)
	}
	mu.Lock() // the answer reached the kernel over a socket: no happens-before the race detector sees
	if len(prompts) != 2 || prompts[0] != "Name? " || prompts[1] != "Secret: " {
		t.Errorf("prompts = %q", prompts)
	}
	mu.Unlock()
	// An OnInput error is EOF for the kernel.
	r = run(t, k, "try:\n    input()\nexcept EOFError:\n    print('eof')", ExecOptions{
		OnInput: func(context.Context, InputRequest) (string, error) { return "", errors.New("no user") },
	})
	if r.err != nil || r.text("") != "eof\n" {
		t.Errorf("OnInput error: %v %q", r.err, r.text(""))
	}
	// Without OnInput, stdin is not allowed.
	r = run(t, k, "input()", ExecOptions{})
	if r.err != nil || r.res.Status != "error" || r.res.EName != "StdinNotImplementedError" {
		t.Errorf("input() without OnInput: %v %+v", r.err, r.res)
	}
}

func testSilent(t *testing.T, k *Kernel) {
	before := mustRun(t, k, "'count'").res.ExecutionCount
	r := run(t, k, "y = 5\ny", ExecOptions{Silent: true, UserExpressions: map[string]string{"double": "y*2", "bad": "1/0"}})
	if r.err != nil || r.res.Status != "ok" {
		t.Fatalf("silent: %v %+v", r.err, r.res)
	}
	if r.find("execute_result") != nil {
		t.Errorf("a silent execute published a result: %+v", r.outputs)
	}
	var double struct {
		Status string
		Data   map[string]string
	}
	if err := json.Unmarshal(r.res.UserExpressions["double"], &double); err != nil || double.Status != "ok" || double.Data["text/plain"] != "10" {
		t.Errorf("user expression double = %s (%v)", r.res.UserExpressions["double"], err)
	}
	var bad struct{ Status, EName string }
	if err := json.Unmarshal(r.res.UserExpressions["bad"], &bad); err != nil || bad.Status != "error" || bad.EName != "ZeroDivisionError" {
		t.Errorf("user expression bad = %s", r.res.UserExpressions["bad"])
	}
	after := mustRun(t, k, "'count'").res.ExecutionCount
	if after != before+1 {
		t.Errorf("execution count %d -> %d: the silent execute was counted", before, after)
	}
}

func testDisplay(t *testing.T, k *Kernel) {
	r := mustRun(t, k, `from IPython.display import display, clear_output
h = display("first", display_id=True)
h.update("second")
print("x")
clear_output(wait=True)`)
	var types []string
	for _, o := range r.outputs {
		types = append(types, o.Type)
	}
	if strings.Join(types, ",") != "display_data,update_display_data,stream,clear_output" {
		t.Fatalf("output types %v", types)
	}
	d, u := r.outputs[0], r.outputs[1]
	if string(d.Transient["display_id"]) == "" || string(d.Transient["display_id"]) != string(u.Transient["display_id"]) {
		t.Errorf("display ids %s %s", d.Transient["display_id"], u.Transient["display_id"])
	}
	if string(u.Data["text/plain"]) != `"'second'"` {
		t.Errorf("update data %s", u.Data["text/plain"])
	}
	if !r.outputs[3].Wait {
		t.Error("clear_output wait not passed")
	}
}

func testCompleteInspect(t *testing.T, k *Kernel) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustRun(t, k, "import os")
	c, err := k.Complete(ctx, "os.pa", 5)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range c.Matches {
		found = found || m == "os.path" || m == "path"
	}
	if !found || c.CursorEnd != 5 {
		t.Errorf("complete = %+v", c)
	}
	in, err := k.Inspect(ctx, "len", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Found || !bytes.Contains(in.Data["text/plain"], []byte("number of items")) {
		t.Errorf("inspect = found %v data %s", in.Found, in.Data["text/plain"])
	}
	in, err = k.Inspect(ctx, "no_such_name_here", 5, 0)
	if err != nil || in.Found {
		t.Errorf("inspect missing: %+v %v", in, err)
	}
}

// testBadSignature makes the kernel itself publish a message signed with the wrong key on iopub, as
// part of an execution of ours: it must be dropped (never reach OnOutput) and counted.
func testBadSignature(t *testing.T, k *Kernel) {
	before := k.BadSignatures()
	r := mustRun(t, k, `from jupyter_client.session import Session
_k = get_ipython().kernel
Session(key=b"not-the-key").send(_k.iopub_socket, "stream", {"name": "stdout", "text": "FORGED\n"}, parent=_k.get_parent("shell"))
print("after")`)
	if strings.Contains(r.text(""), "FORGED") {
		t.Errorf("a badly signed message was delivered: %q", r.text(""))
	}
	if !strings.Contains(r.text(""), "after") {
		t.Errorf("stdout = %q", r.text(""))
	}
	if got := k.BadSignatures() - before; got != 1 {
		t.Errorf("bad signatures counted: %d, want 1", got)
	}
	// The same forgery with the right key is delivered: the test can tell the difference.
	r = mustRun(t, k, `from jupyter_client.session import Session
Session(key=get_ipython().kernel.session.key).send(_k.iopub_socket, "stream", {"name": "stdout", "text": "GENUINE\n"}, parent=_k.get_parent("shell"))`)
	if !strings.Contains(r.text(""), "GENUINE") {
		t.Errorf("a correctly signed message was not delivered: %+v", r.outputs)
	}
}

func testEnv(t *testing.T, k *Kernel) {
	r := mustRun(t, k, "import os; os.environ.get('CARRYOVER_TEST_ENV'), os.environ.get('"+leakCanary+"'), os.getcwd()")
	got := plain(t, r)
	if !strings.HasPrefix(got, "('passed', None, ") {
		t.Errorf("kernel env: %s", got)
	}
	if !strings.Contains(got, k.RuntimeDir()) {
		t.Errorf("cwd %s, want the runtime dir %s", got, k.RuntimeDir())
	}
	fi, err := os.Stat(k.RuntimeDir() + "/connection.json")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("connection file: %v %v", fi, err)
	}
}

func testCancel(t *testing.T, k *Kernel) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := k.Execute(ctx, "import time; time.sleep(0.5)", ExecOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 400*time.Millisecond {
		t.Errorf("cancelled execute: %v after %v", err, time.Since(start))
	}
	// Concurrent executes are serialised and both complete.
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out string
			res, err := k.Execute(context.Background(), "import time; time.sleep(0.05); print("+[]string{"'a'", "'b'"}[i]+")",
				ExecOptions{OnOutput: func(o Output) { out += o.Text }})
			if err != nil || res.Status != "ok" {
				t.Errorf("concurrent execute %d: %v %+v", i, err, res)
			}
			results[i] = out
		}()
	}
	wg.Wait()
	if results[0] != "a\n" || results[1] != "b\n" {
		t.Errorf("concurrent outputs mixed up: %q", results)
	}
}

func testStats(t *testing.T, k *Kernel) {
	mustRun(t, k, "sum(i*i for i in range(2_000_000))")
	st, err := k.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.CPUSeconds <= 0.1 || st.RSSBytes < 20<<20 {
		t.Errorf("stats = %+v", st)
	}
	// A child's CPU is counted once reaped (cutime) or while alive (same process group).
	mustRun(t, k, "import subprocess; subprocess.run(['/usr/bin/python3', '-c', 'sum(i*i for i in range(10_000_000))'])")
	st2, err := k.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st2.CPUSeconds-st.CPUSeconds < 0.1 {
		t.Errorf("child CPU not counted: %+v -> %+v", st, st2)
	}
}

func testMatplotlib(t *testing.T, k *Kernel) {
	r := mustRun(t, k, "import matplotlib.pyplot as plt; plt.plot([1,2]); plt.show()")
	d := r.find("display_data")
	if d == nil {
		t.Fatalf("no display_data in %+v", r.outputs)
	}
	var b64 string
	if err := json.Unmarshal(d.Data["image/png"], &b64); err != nil {
		t.Fatalf("image/png: %v", err)
	}
	png, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Errorf("not a PNG (%d bytes, %v)", len(png), err)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

func stripANSI(s string) string { return ansi.ReplaceAllString(s, "") }

// testLargeOutputs: a big single message and a flood of small ones all arrive, in order, none dropped
// (zmq4's receive queue holds only 10 messages: the reader must keep draining).
func testLargeOutputs(t *testing.T, k *Kernel) {
	r := mustRun(t, k, `import sys
sys.stdout.write("x" * (16 << 20)); sys.stdout.flush()
for i in range(3000):
    print(i)
    if i % 500 == 0:
        display({"text/plain": str(i)}, raw=True)`)
	var stdout strings.Builder
	displays := 0
	for _, o := range r.outputs {
		switch o.Type {
		case "stream":
			stdout.WriteString(o.Text)
		case "display_data":
			displays++
		}
	}
	got := stdout.String()
	if !strings.HasPrefix(got, strings.Repeat("x", 16<<20)) {
		t.Fatalf("the 16 MiB write did not arrive whole (%d bytes of stdout)", len(got))
	}
	lines := strings.Split(strings.TrimSuffix(got[16<<20:], "\n"), "\n")
	if len(lines) != 3000 || lines[0] != "0" || lines[2999] != "2999" {
		t.Errorf("got %d lines after the big write, want 3000 in order", len(lines))
	}
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Errorf("line %d = %q: out of order or lost", i, l)
			break
		}
	}
	if displays != 6 {
		t.Errorf("display_data count %d, want 6", displays)
	}
}

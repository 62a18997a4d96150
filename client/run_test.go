package client_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

func TestRunKeepsVariables(t *testing.T) {
	s := newSession(t, client.CreateRequest{})
	run(t, s.ID, "counter = 41")
	res := run(t, s.ID, "counter += 1\nprint(counter)\ncounter")
	if res.SessionID != s.ID || res.ExecutionCount != 2 || res.Stdout != "42\n" || resultOf(res) != "42" {
		t.Fatalf("second run: %+v", res)
	}
	if res.Checkpoint == nil || res.Checkpoint.Turn != 2 || !contains(res.Checkpoint.Saved, "counter") {
		t.Fatalf("checkpoint: %+v", res.Checkpoint)
	}
	var stream, result bool
	for _, o := range res.Outputs {
		stream = stream || (o.Type == "stream" && o.Name == "stdout" && o.Text == "42\n")
		result = result || (o.Type == "execute_result" && o.DataString("text/plain") == "42" && o.ExecutionCount == 2)
	}
	if !stream || !result {
		t.Fatalf("outputs: %+v", res.Outputs)
	}
}

func TestRunThatRaisesIsNoHTTPError(t *testing.T) {
	s := newSession(t, client.CreateRequest{})
	res, err := api.Run(testCtx(t), s.ID, client.RunRequest{Code: "1/0"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != client.StatusError || res.Error == nil || res.Error.EName != "ZeroDivisionError" {
		t.Fatalf("answer: status %s, error %+v", res.Status, res.Error)
	}
	last := res.Outputs[len(res.Outputs)-1]
	if last.Type != "error" || last.EValue != "division by zero" || len(last.Traceback) == 0 {
		t.Fatalf("error output: %+v", last)
	}
}

func TestRunTimeoutReturnsPartialResult(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	run(t, s.ID, "kept = 7")
	start := time.Now()
	res, err := api.Run(ctx, s.ID, client.RunRequest{Code: "print('before', flush=True)\nimport time\ntime.sleep(30)",
		TimeoutSeconds: client.Seconds(0.5)})
	e := wantAPIError(t, err, http.StatusGatewayTimeout, client.CodeTimeout)
	if res == nil || res.Stdout != "before\n" || res.ExecutionCount != 2 || e.Result == nil {
		t.Fatalf("partial result: %+v", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timeout took %v", d)
	}
	if got := resultOf(run(t, s.ID, "kept")); got != "7" {
		t.Fatalf("state after timeout: kept = %q", got)
	}
}

func TestExecute(t *testing.T) {
	res, err := api.Execute(testCtx(t), client.ExecuteRequest{Language: "python", Code: "print(6*7)"})
	if err != nil || res.Status != client.StatusOK || res.Stdout != "42\n" || res.Checkpoint != nil {
		t.Fatalf("Execute: %+v, %v", res, err)
	}
}

func TestExec(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	res, err := api.Exec(ctx, s.ID, client.ExecRequest{Command: "echo out; echo err >&2; exit 3"})
	if err != nil || res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 {
		t.Fatalf("Exec string: %+v, %v", res, err)
	}
	res, err = api.Exec(ctx, s.ID, client.ExecRequest{Command: []string{"echo", "a  b"}, Env: map[string]string{"X": "1"}})
	if err != nil || res.Stdout != "a  b\n" || res.ExitCode != 0 {
		t.Fatalf("Exec argv: %+v, %v", res, err)
	}
}

func TestContextAndComplete(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	run(t, s.ID, "import os")
	p, err := api.PatchContext(ctx, s.ID, client.ContextRequest{EnvVars: map[string]string{"CO_TEST": "yes"}})
	if err != nil || p.AgentContext.EnvVars["CO_TEST"] != "yes" {
		t.Fatalf("PatchContext: %+v, %v", p, err)
	}
	if got := resultOf(run(t, s.ID, "os.environ['CO_TEST']")); got != "'yes'" {
		t.Fatalf("env in kernel: %s", got)
	}
	code := "os.pa"
	c, err := api.Complete(ctx, s.ID, code, len(code))
	if err != nil || !contains(c.Matches, "path") && !contains(c.Matches, "os.path") || c.CursorEnd != len(code) {
		t.Fatalf("Complete: %+v, %v", c, err)
	}
	if !strings.HasPrefix(code[c.CursorStart:], "pa") && !strings.HasPrefix(code[c.CursorStart:], "os.pa") {
		t.Fatalf("Complete cursor_start %d", c.CursorStart)
	}
}

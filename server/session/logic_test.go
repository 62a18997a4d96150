package session

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/carryover/carryover"
)

func TestCompleteWindow(t *testing.T) {
	short := "import o"
	if sub, off := completeWindowOf(short, 8); sub != short || off != 0 {
		t.Fatalf("a short code is sent whole: %q %d", sub, off)
	}
	long := strings.Repeat("x", 3*completeWindow) + "\nimport é" + strings.Repeat("y", 3*completeWindow)
	cursor := 3*completeWindow + len("\nimport é") // in code points
	sub, off := completeWindowOf(long, cursor)
	if off != 3*completeWindow+1 || !strings.HasPrefix(sub, "import é") {
		t.Fatalf("window starts at %d with %q, want the line start", off, sub[:10])
	}
	if n := utf8.RuneCountInString(sub); n > 2*completeWindow {
		t.Fatalf("window of %d code points", n)
	}
	// The cursor keeps its place inside the window.
	if []rune(long)[cursor-1] != []rune(sub)[cursor-off-1] {
		t.Fatal("cursor moved")
	}
}

func TestSkippedKey(t *testing.T) {
	a := &carryover.CheckpointResult{Skipped: []carryover.VarSkip{{Name: "g", Type: "generator", Reason: "r"}}}
	b := &carryover.CheckpointResult{Skipped: []carryover.VarSkip{{Name: "g", Type: "generator", Reason: "other"}}}
	f := &carryover.CheckpointResult{FilesSkipped: []carryover.FileSkip{{Path: "g", Reason: "r"}}}
	if skippedKey(&carryover.CheckpointResult{}) != "" || skippedKey(a) == skippedKey(b) || skippedKey(a) == skippedKey(f) || skippedKey(a) != skippedKey(a) {
		t.Fatal("skippedKey does not tell the skipped sets apart")
	}
}

func TestRunTimeout(t *testing.T) {
	s, _, _ := testService(t, func(c *Config) { c.DefaultRunTimeout = 7 * time.Second; c.MaxRunTimeoutSeconds = 60 })
	if d, err := s.cfg.runTimeout(nil); d != 7*time.Second || err != nil {
		t.Errorf("default = %v, %v", d, err)
	}
	if d, err := s.cfg.runTimeout(ptr(1.5)); d != 1500*time.Millisecond || err != nil {
		t.Errorf("1.5 = %v, %v", d, err)
	}
	for _, v := range []float64{0, -1, 60.5} {
		if _, err := s.cfg.runTimeout(&v); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("%g: %v", v, err)
		}
	}
}

func TestRunRefusalsBeforeKernel(t *testing.T) {
	ctx := context.Background()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "r"})
	for name, req := range map[string]RunRequest{
		"NUL":     {Code: "1\x00"},
		"env":     {Code: "1", Env: map[string]string{"": "x"}},
		"timeout": {Code: "1", TimeoutSeconds: ptr(-1.0)},
	} {
		if _, err := handleOf(t, s, "r").Run(ctx, req, RunOptions{}); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := s.RunEphemeral(ctx, EphemeralRequest{Language: "ruby", Code: "1"})
	wantCode(t, err, carryover.CodeInvalid)
	if doc, _ := s.Get("r"); doc.State != carryover.StatePending {
		t.Fatalf("a refused run started the session: %s", doc.State)
	}
}

func TestRegisterTool(t *testing.T) {
	ctx := context.Background()
	s, store, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "t"})
	_, err := s.RegisterTool(ctx, "t", carryover.Tool{Name: "9bad"})
	wantCode(t, err, carryover.CodeInvalid)
	_, err = s.RegisterTool(ctx, "t", carryover.Tool{Name: "ok", InputSchema: json.RawMessage(`{"type":"nope"}`)})
	wantCode(t, err, carryover.CodeInvalid)

	first, err := s.RegisterTool(ctx, "t", carryover.Tool{Name: "search", Description: "v1"})
	if err != nil || first.ToolType != "custom" {
		t.Fatalf("RegisterTool = %+v, %v", first, err)
	}
	again, err := s.RegisterTool(ctx, "t", carryover.Tool{Name: "search", Description: "v2", ToolType: "api"})
	if err != nil || again.Description != "v2" || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("re-registration = %+v, %v; want v2 with the first created_at", again, err)
	}
	ts, _ := s.Tools(ctx, "t")
	if len(ts) != 1 {
		t.Fatalf("tools = %+v", ts)
	}
	if evs := store.EventTypes("t"); len(evs) != 2 || evs[0] != carryover.EventToolRegistered {
		t.Fatalf("events = %v", evs)
	}
}

func TestPatchContextWithoutKernel(t *testing.T) {
	ctx := context.Background()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "c"})
	wd := "data/in"
	doc, err := s.PatchContext(ctx, "c", ContextRequest{WorkingDir: &wd, EnvVars: map[string]string{"A": "1"},
		CustomState: map[string]any{"step": 2.0}})
	if err != nil {
		t.Fatal(err)
	}
	if doc.AgentContext.WorkingDir != "/workspace/data/in" || doc.AgentContext.EnvVars["A"] != "1" || doc.AgentContext.CustomState["step"] != 2.0 {
		t.Fatalf("context = %+v", doc.AgentContext)
	}
	if st, err := os.Stat(s.cfg.hostPath("c", "/workspace/data/in")); err != nil || !st.IsDir() {
		t.Errorf("working dir not made in the workspace: %v", err)
	}
	bad := "../x"
	_, err = s.PatchContext(ctx, "c", ContextRequest{WorkingDir: &bad})
	wantCode(t, err, carryover.CodeInvalid)
	_, err = s.PatchContext(ctx, "c", ContextRequest{EnvVars: map[string]string{"A=": "1"}})
	wantCode(t, err, carryover.CodeInvalid)
	if doc, _ := s.Get("c"); doc.AgentContext.WorkingDir != "/workspace/data/in" {
		t.Fatalf("a refused patch changed the context: %+v", doc.AgentContext)
	}
}

func TestReadsWithoutKernel(t *testing.T) {
	ctx := context.Background()
	s, _, prov := testService(t, nil)
	prov.CommandFn = echo(0, 0)
	mustCreate(t, s, CreateRequest{SessionID: "v"})
	vars, err := handleOf(t, s, "v").Variables(ctx)
	if err != nil || vars.Live || len(vars.Variables) != 0 || !strings.Contains(vars.Note, "no kernel") {
		t.Fatalf("Variables = %+v, %v", vars, err)
	}
	rep, err := handleOf(t, s, "v").Complete(ctx, "imp", 3)
	if err != nil || len(rep.Matches) != 0 || rep.CursorStart != 3 {
		t.Fatalf("Complete = %+v, %v", rep, err)
	}
	_, err = handleOf(t, s, "v").Complete(ctx, "imp", 4)
	wantCode(t, err, carryover.CodeInvalid)
	_, err = handleOf(t, s, "v").CheckpointNow(ctx)
	wantCode(t, err, carryover.CodeConflict)
	if cps, err := s.Checkpoints(ctx, "v"); err != nil || len(cps) != 0 {
		t.Fatalf("Checkpoints = %v, %v", cps, err)
	}
	_, err = handleOf(t, s, "v").RestoreCheckpoint(ctx, "ckpt_x")
	wantCode(t, err, carryover.CodeNotFound)

	// The notebook is the recorded history.
	if _, err := handleOf(t, s, "v").RunCommand(ctx, CommandRequest{Command: "echo hi"}, CommandOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Notebook(ctx, "v")
	if err != nil || !strings.Contains(string(b), `"source": "!echo hi"`) || !strings.Contains(string(b), `/bin/sh -c echo hi`) {
		t.Fatalf("Notebook = %s, %v", b, err)
	}
}

package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestStateSetCompleteExample is the StateSet "complete example" on this API: create with a budget,
// start, exec, write a file, update context, run, read events, stop.
func TestStateSetCompleteExample(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	s := ts.newSession(client.CreateRequest{Name: "refactor-auth",
		Budget:   &client.Budget{CostCapCents: 500, IterationLimit: 100},
		Sandbox:  &client.SandboxRequest{CPUs: "2", Memory: "4Gi", TimeoutSeconds: client.Seconds(3600)},
		ClientID: "agent-1"})
	id := s.ID
	if s.State != "pending" || !strings.HasPrefix(id, "sess_") {
		t.Fatalf("create: %s", dump(s))
	}
	if s = ts.act(ts.c.Start, id); s.State != "running" || s.Sandbox.Status != "live" {
		t.Fatalf("start: %s", dump(s))
	}
	postFile := func(path, content string) {
		t.Helper()
		must(t, 201, "post "+path, func(ctx context.Context) (*client.FileInfo, error) {
			return ts.c.PostFile(ctx, id, path, content, "")
		})
	}
	postFile("/workspace/src/analyze.py", "import os\nprint('analyzed', os.getcwd().endswith('src'), os.environ.get('NODE_ENV'))\n")
	x := ts.exec(id, client.ExecRequest{Command: []string{"python3", "analyze.py"}, WorkingDir: "/workspace/src"})
	if x.Stdout != "analyzed True None\n" || x.ExitCode != 0 {
		t.Fatalf("exec: %s", dump(x))
	}
	postFile("/workspace/notes.md", "# Progress\n- Step 1 done")
	dir := "/workspace/src"
	s = must(t, 200, "context", func(ctx context.Context) (*client.Session, error) {
		return ts.c.PatchContext(ctx, id, client.ContextRequest{WorkingDir: &dir, EnvVars: map[string]string{"NODE_ENV": "test"},
			CustomState: map[string]any{"step": 1, "branch": "feature/auth"}})
	})
	if s.AgentContext.CustomState["branch"] != "feature/auth" || s.AgentContext.WorkingDir != "/workspace/src" {
		t.Fatalf("context: %s", dump(s))
	}
	// The context is live in the kernel and in exec.
	r := ts.run(id, "import os\nprint(os.getcwd().endswith('src'), os.environ['NODE_ENV'], open('../notes.md').read().splitlines()[0])")
	if r.Stdout != "True test # Progress\n" {
		t.Fatalf("run: %s", dump(r))
	}
	x = ts.exec(id, client.ExecRequest{Command: "python3 analyze.py | tr a-z A-Z"})
	if x.Stdout != "ANALYZED TRUE TEST\n" {
		t.Fatalf("exec string: %s", dump(x))
	}
	// Shell commands are part of the recorded history, beside the runs.
	hist := must(t, 200, "executions", func(ctx context.Context) ([]client.Execution, error) { return ts.c.Executions(ctx, id, 0) })
	var kinds []string
	for _, e := range hist {
		kinds = append(kinds, e.Kind+":"+e.Code)
	}
	if len(kinds) != 3 || kinds[0] != "exec:python3 analyze.py" || kinds[2] != "exec:python3 analyze.py | tr a-z A-Z" || !strings.HasPrefix(kinds[1], "run:") {
		t.Fatalf("history: %q", kinds)
	}
	must(t, 201, "register tool", func(ctx context.Context) (*client.Tool, error) {
		return ts.c.RegisterTool(ctx, id, client.ToolRequest{Name: "run_tests", ToolType: "custom", Description: "Run the project test suite",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"filter": map[string]any{"type": "string", "description": "Test name filter"}}}})
	})
	tools := must(t, 200, "tools", func(ctx context.Context) ([]client.Tool, error) { return ts.c.Tools(ctx, id) })
	if len(tools) == 0 || tools[0].Name != "run_tests" {
		t.Fatalf("tools: %s", dump(tools))
	}
	if s = ts.act(ts.c.Reattach, "agent-1"); s.ID != id {
		t.Fatalf("reattach: %s", dump(s))
	}
	if s = ts.session(id); s.BudgetConsumed.Iterations != 3 {
		t.Fatalf("iterations: %s", dump(s))
	}
	s = must(t, 200, "stop", func(ctx context.Context) (*client.Session, error) { return ts.c.Stop(ctx, id, "Task complete") })
	if s.State != "completed" {
		t.Fatalf("stop: %s", dump(s))
	}
	errCode(t, errOf(ts.c.Run(ts.ctx(), id, client.RunRequest{Code: "1"})), 409, "session_closed")
	evs := ts.events(id, 0, 100, "")
	got := strings.Join(typesOf(evs), ",")
	for _, want := range []string{"session_started", "sandbox_created", "exec_started", "exec_completed", "tool_registered", "heartbeat", "session_completed"} {
		if !strings.Contains(got, want) {
			t.Errorf("event %s missing from %s", want, got)
		}
	}
	// Sequence numbers from 1 without gaps; after_sequence and event_type filter.
	for i, e := range evs {
		if e.SequenceNumber != int64(i+1) {
			t.Fatalf("gap at %d: %s", i, dump(evs))
		}
	}
	if page := ts.events(id, 2, 2, ""); len(page) != 2 || page[0].SequenceNumber != 3 {
		t.Fatalf("after/limit: %s", dump(page))
	}
	if n := len(ts.events(id, 0, 0, "exec_completed")); n != 2 {
		t.Fatalf("event_type filter: %d exec_completed events", n)
	}
	// order=desc: the end of the log first; before_sequence pages back from there.
	n := int64(len(evs))
	tail := must(t, 200, "newest events", func(ctx context.Context) ([]client.Event, error) {
		return ts.c.EventsWhere(ctx, id, client.EventsQuery{Newest: true, Limit: 2})
	})
	if len(tail) != 2 || tail[0].SequenceNumber != n || tail[1].SequenceNumber != n-1 {
		t.Fatalf("newest 2 of %d: %s", n, dump(tail))
	}
	back := must(t, 200, "events before", func(ctx context.Context) ([]client.Event, error) {
		return ts.c.EventsWhere(ctx, id, client.EventsQuery{Newest: true, Limit: 2, Before: tail[1].SequenceNumber, Type: "exec_completed"})
	})
	if len(back) != 2 || back[0].EventType != "exec_completed" || back[0].SequenceNumber <= back[1].SequenceNumber || back[0].SequenceNumber >= n-1 {
		t.Fatalf("2 exec_completed before #%d: %s", n-1, dump(back))
	}
}

// typesOf lists the types of events, in their order.
func typesOf(evs []client.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.EventType)
	}
	return out
}

// TestBudgetIterations: a budget of 3 iterations rejects the 4th with the events.
func TestBudgetIterations(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "b3", Budget: &client.Budget{IterationLimit: 3}})
	ts.run("b3", "a = 1")
	ts.exec("b3", client.ExecRequest{Command: "true"})
	ts.run("b3", "a += 1")
	err := errOf(ts.c.Run(ts.ctx(), "b3", client.RunRequest{Code: "a += 1"}))
	errCode(t, err, 402, "budget_exceeded")
	if e := err.(*client.Error); e.Details["limit"] != "iteration_limit" {
		t.Fatalf("details: %v", e.Details)
	}
	errCode(t, errOf(ts.c.Exec(ts.ctx(), "b3", client.ExecRequest{Command: "true"})), 402, "budget_exceeded")
	types := strings.Join(ts.eventTypes("b3", 200, ""), ",")
	if strings.Count(types, "budget_warning") != 1 || !strings.Contains(types, "budget_exceeded") {
		t.Fatalf("events: %s", types)
	}
}

// TestPauseResume: paused rejects run with session_paused and keeps the kernel state.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "p"})
	ts.run("p", "v = 7")
	ts.act(ts.c.Pause, "p")
	errCode(t, errOf(ts.c.Run(ts.ctx(), "p", client.RunRequest{Code: "v"})), 409, "session_paused")
	errCode(t, errOf(ts.c.Exec(ts.ctx(), "p", client.ExecRequest{Command: "true"})), 409, "session_paused")
	errCode(t, errOf(ts.c.Pause(ts.ctx(), "p")), 409, "conflict")
	ts.act(ts.c.Resume, "p")
	if r := ts.run("p", "v"); resultOf(r) != "7" {
		t.Fatalf("%s", dump(r))
	}
}

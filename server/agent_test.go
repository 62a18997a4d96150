package server_test

import (
	"strings"
	"testing"
)

func eventTypes(r resp) []string {
	var out []string
	evs, _ := r.get("events").([]any)
	for _, e := range evs {
		out = append(out, e.(map[string]any)["event_type"].(string))
	}
	return out
}

// TestStateSetCompleteExample is the StateSet "complete example" on this API: create with a budget,
// start, exec, write a file, update context, run, read events, stop.
func TestStateSetCompleteExample(t *testing.T) {
	ts := startServer(t, "")
	r := ts.must(201, "POST", "/api/sessions", map[string]any{"name": "refactor-auth",
		"budget":  map[string]any{"cost_cap_cents": 500, "iteration_limit": 100},
		"sandbox": map[string]any{"cpus": "2", "memory": "4Gi", "timeout_seconds": 3600}, "client_id": "agent-1"})
	id := r.str("session", "id")
	if r.str("session", "state") != "pending" || !strings.HasPrefix(id, "sess_") {
		t.Fatalf("create: %s", r.Body)
	}
	if r = ts.must(200, "POST", "/api/sessions/"+id+"/start", nil); r.str("session", "state") != "running" || r.str("session", "sandbox", "status") != "live" {
		t.Fatalf("start: %s", r.Body)
	}
	ts.must(201, "POST", "/api/sessions/"+id+"/files", map[string]any{"path": "/workspace/src/analyze.py", "content": "import os\nprint('analyzed', os.getcwd().endswith('src'), os.environ.get('NODE_ENV'))\n"})
	r = ts.must(200, "POST", "/api/sessions/"+id+"/exec", map[string]any{"command": []string{"python3", "analyze.py"}, "working_dir": "/workspace/src"})
	if r.str("stdout") != "analyzed True None\n" || r.str("exit_code") != "0" {
		t.Fatalf("exec: %s", r.Body)
	}
	ts.must(201, "POST", "/api/sessions/"+id+"/files", map[string]any{"path": "/workspace/notes.md", "content": "# Progress\n- Step 1 done"})
	r = ts.must(200, "PATCH", "/api/sessions/"+id+"/context", map[string]any{"working_dir": "/workspace/src", "env_vars": map[string]any{"NODE_ENV": "test"},
		"custom_state": map[string]any{"step": 1, "branch": "feature/auth"}})
	if r.str("session", "agent_context", "custom_state", "branch") != "feature/auth" || r.str("session", "agent_context", "working_dir") != "/workspace/src" {
		t.Fatalf("context: %s", r.Body)
	}
	// The context is live in the kernel and in exec.
	r = ts.run(id, "import os\nprint(os.getcwd().endswith('src'), os.environ['NODE_ENV'], open('../notes.md').read().splitlines()[0])")
	if r.str("stdout") != "True test # Progress\n" {
		t.Fatalf("run: %s", r.Body)
	}
	r = ts.must(200, "POST", "/api/sessions/"+id+"/exec", map[string]any{"command": "python3 analyze.py | tr a-z A-Z"})
	if r.str("stdout") != "ANALYZED TRUE TEST\n" {
		t.Fatalf("exec string: %s", r.Body)
	}
	// Shell commands are part of the recorded history, beside the runs.
	hist := ts.must(200, "GET", "/api/sessions/"+id+"/executions", nil)
	var kinds []string
	for _, e := range hist.get("executions").([]any) {
		kinds = append(kinds, e.(map[string]any)["kind"].(string)+":"+e.(map[string]any)["code"].(string))
	}
	if len(kinds) != 3 || kinds[0] != "exec:python3 analyze.py" || kinds[2] != "exec:python3 analyze.py | tr a-z A-Z" || !strings.HasPrefix(kinds[1], "run:") {
		t.Fatalf("history: %q", kinds)
	}
	ts.must(201, "POST", "/api/sessions/"+id+"/tools", map[string]any{"name": "run_tests", "tool_type": "custom", "description": "Run the project test suite",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"filter": map[string]any{"type": "string", "description": "Test name filter"}}}})
	if r = ts.must(200, "GET", "/api/sessions/"+id+"/tools", nil); r.str("tools", "0", "name") != "run_tests" {
		t.Fatalf("tools: %s", r.Body)
	}
	if r = ts.must(200, "POST", "/api/sessions/reattach", map[string]any{"client_id": "agent-1"}); r.str("session", "id") != id {
		t.Fatalf("reattach: %s", r.Body)
	}
	r = ts.must(200, "GET", "/api/sessions/"+id, nil)
	if r.str("session", "budget_consumed", "iterations") != "3" {
		t.Fatalf("iterations: %s", r.Body)
	}
	if r = ts.must(200, "POST", "/api/sessions/"+id+"/stop", map[string]any{"reason": "Task complete"}); r.str("session", "state") != "completed" {
		t.Fatalf("stop: %s", r.Body)
	}
	errCode(t, ts.do("POST", "/api/sessions/"+id+"/run", map[string]any{"code": "1"}), 409, "session_closed")
	r = ts.must(200, "GET", "/api/sessions/"+id+"/events?limit=100", nil)
	got := strings.Join(eventTypes(r), ",")
	for _, want := range []string{"session_started", "sandbox_created", "exec_started", "exec_completed", "tool_registered", "heartbeat", "session_completed"} {
		if !strings.Contains(got, want) {
			t.Errorf("event %s missing from %s", want, got)
		}
	}
	// Sequence numbers from 1 without gaps; after_sequence and event_type filter.
	evs := r.get("events").([]any)
	for i, e := range evs {
		if int(e.(map[string]any)["sequence_number"].(float64)) != i+1 {
			t.Fatalf("gap at %d: %s", i, r.Body)
		}
	}
	r = ts.must(200, "GET", "/api/sessions/"+id+"/events?after_sequence=2&limit=2", nil)
	if n := len(r.get("events").([]any)); n != 2 || r.str("events", "0", "sequence_number") != "3" {
		t.Fatalf("after/limit: %s", r.Body)
	}
	r = ts.must(200, "GET", "/api/sessions/"+id+"/events?event_type=exec_completed", nil)
	if n := len(r.get("events").([]any)); n != 2 {
		t.Fatalf("event_type filter: %s", r.Body)
	}
}

// TestBudgetIterations: a budget of 3 iterations rejects the 4th with the events.
func TestBudgetIterations(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "b3", "budget": map[string]any{"iteration_limit": 3}})
	ts.run("b3", "a = 1")
	ts.must(200, "POST", "/api/sessions/b3/exec", map[string]any{"command": "true"})
	ts.run("b3", "a += 1")
	r := ts.do("POST", "/api/sessions/b3/run", map[string]any{"code": "a += 1"})
	errCode(t, r, 402, "budget_exceeded")
	if r.str("error", "details", "limit") != "iteration_limit" {
		t.Fatalf("details: %s", r.Body)
	}
	errCode(t, ts.do("POST", "/api/sessions/b3/exec", map[string]any{"command": "true"}), 402, "budget_exceeded")
	ev := ts.must(200, "GET", "/api/sessions/b3/events?limit=200", nil)
	types := strings.Join(eventTypes(ev), ",")
	if strings.Count(types, "budget_warning") != 1 || !strings.Contains(types, "budget_exceeded") {
		t.Fatalf("events: %s", types)
	}
}

// TestPauseResume: paused rejects run with session_paused and keeps the kernel state.
func TestPauseResume(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "p"})
	ts.run("p", "v = 7")
	ts.must(200, "POST", "/api/sessions/p/pause", nil)
	errCode(t, ts.do("POST", "/api/sessions/p/run", map[string]any{"code": "v"}), 409, "session_paused")
	errCode(t, ts.do("POST", "/api/sessions/p/exec", map[string]any{"command": "true"}), 409, "session_paused")
	errCode(t, ts.do("POST", "/api/sessions/p/pause", nil), 409, "conflict")
	ts.must(200, "POST", "/api/sessions/p/resume", nil)
	if r := ts.run("p", "v"); r.str("result") != "7" {
		t.Fatalf("%s", r.Body)
	}
}

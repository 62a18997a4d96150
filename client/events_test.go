package client_test

import (
	"encoding/json"
	"testing"

	"github.com/carryover/carryover/client"
)

func TestEventsExecutionsTools(t *testing.T) {
	ctx := testCtx(t)
	s := newSession(t, client.CreateRequest{})
	run(t, s.ID, "x = 1")
	if _, err := api.Exec(ctx, s.ID, client.ExecRequest{Command: "true"}); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	tool, err := api.RegisterTool(ctx, s.ID, client.ToolRequest{Name: "run_tests", Description: "runs the tests",
		InputSchema: map[string]any{"type": "object"}})
	if err != nil || tool.Name != "run_tests" || tool.ToolType != "custom" {
		t.Fatalf("RegisterTool: %+v, %v", tool, err)
	}
	tools, err := api.Tools(ctx, s.ID)
	if err != nil || len(tools) != 1 || string(tools[0].InputSchema) != `{"type":"object"}` || tools[0].CreatedAt.IsZero() {
		t.Fatalf("Tools: %+v, %v", tools, err)
	}

	evs, err := api.Events(ctx, s.ID, 0, 1000, "")
	if err != nil || len(evs) == 0 {
		t.Fatalf("Events: %v, %v", evs, err)
	}
	types := map[string]bool{}
	for i, ev := range evs {
		if ev.SequenceNumber != int64(i+1) || ev.CreatedAt.IsZero() || !json.Valid(ev.Payload) {
			t.Fatalf("event %d: %+v", i, ev)
		}
		types[ev.EventType] = true
	}
	for _, want := range []string{"session_started", "exec_started", "exec_completed", "tool_registered"} {
		if !types[want] {
			t.Errorf("no %s event in %v", want, types)
		}
	}
	only, err := api.Events(ctx, s.ID, 0, 0, "tool_registered")
	if err != nil || len(only) != 1 || only[0].EventType != "tool_registered" {
		t.Fatalf("Events filtered: %+v, %v", only, err)
	}
	after, err := api.Events(ctx, s.ID, evs[len(evs)-1].SequenceNumber, 0, "")
	if err != nil || len(after) != 0 {
		t.Fatalf("Events after the last: %+v, %v", after, err)
	}

	ex, err := api.Executions(ctx, s.ID, 0)
	if err != nil || len(ex) != 2 || ex[0].Kind != "run" || ex[0].Code != "x = 1" || ex[1].Kind != "exec" {
		t.Fatalf("Executions: %+v, %v", ex, err)
	}
	rr, err := ex[0].RunResult()
	if err != nil || rr.Status != client.StatusOK || rr.ExecutionCount != 1 {
		t.Fatalf("run execution's result: %+v, %v", rr, err)
	}
	er, err := ex[1].ExecResult()
	if err != nil || er.ExitCode != 0 {
		t.Fatalf("exec execution's result: %+v, %v", er, err)
	}
}

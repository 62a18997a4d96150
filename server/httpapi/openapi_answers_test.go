package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session"
	"github.com/carryover/carryover/server/session/nodewatch"
	"github.com/carryover/carryover/server/session/stream"
)

// TestOpenAPIGoAnswers: the Go values the handlers answer, filled as the service fills them,
// marshal to JSON the description accepts (field names and types; no kernel needed).
func TestOpenAPIGoAnswers(t *testing.T) {
	c := schemaCompiler(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	str := func(s string) *string { return &s }
	n := 3
	sess := carryover.Session{ID: "s1", Name: "n", Language: "python", State: carryover.StateRunning,
		Sandbox:      carryover.Sandbox{ID: "sbx_1", Status: carryover.SandboxLive, CPUs: "2", Memory: "4Gi", TimeoutSeconds: 60, StartedAt: &now},
		Data:         map[string]any{"k": 1},
		AgentContext: carryover.AgentContext{WorkingDir: "/workspace", EnvVars: map[string]string{}, CustomState: map[string]any{}},
		Budget:       carryover.Budget{CostCapCents: 5, IterationLimit: 2, DurationLimitSeconds: 9},
		Rotation:     carryover.Rotation{PreRotateBufferSeconds: 120}, ClientID: "c", Tenant: "default",
		LastCheckpoint: &carryover.CheckpointRef{ID: "cp", Turn: 1, CreatedAt: now}, ExecutionCount: 1, StopReason: "x",
		RunningSince: &now, CreatedAt: now, UpdatedAt: now, LastActivity: now}
	cp := &carryover.CheckpointResult{ID: "cp", Turn: 1, Saved: []string{"a"}, Skipped: []carryover.VarSkip{{Name: "g", Type: "generator", Reason: "r"}},
		FilesSkipped: []carryover.FileSkip{{Path: ".env", Reason: "hidden"}}, CreatedAt: now}
	outputs := []kernel.Output{
		{Type: "stream", Name: "stdout", Text: "1\n"},
		{Type: "display_data", Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"x"`)}, Transient: map[string]json.RawMessage{"display_id": json.RawMessage(`"d"`)}},
		{Type: "update_display_data", Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"x"`)}},
		{Type: "execute_result", Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"2"`)}, ExecutionCount: 3},
		{Type: "error", EName: "E", EValue: "v", Traceback: []string{"t"}},
		{Type: "clear_output", Wait: true},
	}
	run := &session.RunResult{SessionID: "s1", ExecutionCount: 3, Status: "error", Result: str("2"), Outputs: outputs,
		Error: &session.RunError{EName: "E", EValue: "v", Traceback: []string{"t"}}, OutputTruncated: 1, Checkpoint: cp, CheckpointError: "e", RecordError: "e"}
	bare := &session.RunResult{Status: "ok", Outputs: []kernel.Output{}}
	execRes := &session.CommandResult{Stdout: "o", ExitCode: 1, TimedOut: true, StdoutDropped: 1, StderrDropped: 1, RecordError: "e"}
	runJSON, _ := json.Marshal(run)
	execJSON, _ := json.Marshal(execRes)
	restore := carryover.RestoreResult{CheckpointID: "cp", Turn: 1, Restored: []string{"a"}, Groups: []carryover.GroupTiming{{Names: []string{"a"}, MS: 1}}}
	errBody := func(e *carryover.Error) any {
		rec := httptest.NewRecorder()
		writeError(rec, e)
		return json.RawMessage(rec.Body.Bytes())
	}
	timeoutErr := carryover.Errorf(carryover.CodeTimeout, "timed out").WithDetails("timeout_seconds", 1)
	timeoutErr.Result = run
	notOwnerErr := carryover.Errorf(carryover.CodeNotOwner, "moved").WithDetails("session_id", "s1", "owner_node", "b", "owner_addr", "http://b")
	notOwnerErr.Result = run

	cases := []struct {
		what, loc string
		v         any
	}{
		{"session answer", respSchema("/api/sessions/{id}", "get", 200), sessionBody(sess)},
		{"run answer", respSchema("/api/sessions/{id}/run", "post", 200), run},
		{"execute answer", respSchema("/api/execute", "post", 200), bare},
		{"exec answer", respSchema("/api/sessions/{id}/exec", "post", 200), execRes},
		{"complete answer", respSchema("/api/sessions/{id}/complete", "post", 200), &kernel.CompleteReply{Matches: []string{"a"}}},
		{"events", respSchema("/api/sessions/{id}/events", "get", 200), map[string]any{"events": []carryover.Event{{SequenceNumber: 1, EventType: "heartbeat", Payload: json.RawMessage(`{}`), CreatedAt: now}}}},
		{"executions", respSchema("/api/sessions/{id}/executions", "get", 200), map[string]any{"executions": []carryover.Execution{
			{SessionID: "s1", ExecutionCount: 1, Kind: "run", Code: "1", Status: "ok", Result: runJSON, StartedAt: now},
			{SessionID: "s1", ExecutionCount: 1, Kind: "exec", Code: "ls", Status: "ok", Result: execJSON, StartedAt: now}}}},
		{"tools", respSchema("/api/sessions/{id}/tools", "get", 200), map[string]any{"tools": []carryover.Tool{{Name: "t", ToolType: "custom", InputSchema: json.RawMessage(`{}`), CreatedAt: now}}}},
		{"tool", respSchema("/api/sessions/{id}/tools", "post", 201), map[string]any{"tool": carryover.Tool{Name: "t", ToolType: "custom", CreatedAt: now}}},
		{"checkpoints", respSchema("/api/sessions/{id}/checkpoints", "get", 200), map[string]any{"checkpoints": []carryover.CheckpointSummary{{ID: "cp", Turn: 1, CreatedAt: now.Format(timeFormat), Variables: []string{"a"}}}}},
		{"checkpoint", respSchema("/api/sessions/{id}/checkpoint", "post", 201), map[string]any{"checkpoint": cp}},
		{"usage", respSchema("/api/sessions/{id}/usage", "get", 200), map[string]any{"usage": carryover.Usage{SessionID: "s1", CPUSeconds: 1.5,
			MemoryPeakBytes: 1 << 27, StoredBytes: 4096, Checkpoints: 2, Sandbox: carryover.SandboxHibernated}}},
		{"restore", respSchema("/api/sessions/{id}/checkpoints/{cid}/restore", "post", 200), map[string]any{"session": sess.View(), "restore": restore}},
		{"files", respSchema("/api/sessions/{id}/files", "get", 200), map[string]any{"files": []session.FileInfo{{Path: "a", Size: 1, ModifiedAt: now}}}},
		{"file written", respSchema("/api/sessions/{id}/files/{path}", "put", 201), map[string]any{"file": session.FileInfo{Path: "a", Size: 1, ModifiedAt: now}}},
		{"error", component("Error"), errBody(carryover.Errorf(carryover.CodeNotFound, "x").WithDetails("session_id", "s1"))},
		{"error with result", component("Error"), errBody(timeoutErr)},
		{"not_owner with result", component("Error"), errBody(notOwnerErr)},
		{"capacity", component("Error"), errBody(carryover.Errorf(carryover.CodeCapacity, "full").WithDetails("reason", "busy", "live", 4, "capacity", 4, "queued", 1, "retry_after_seconds", 2))},
		{"status", respSchema("/api/status", "get", 200), nodewatch.NodeStatus{NodeID: "a", Capacity: nodewatch.CapacityStatus{MaxLiveKernels: 4, Source: "config"},
			Evictions: map[string]int64{"capacity": 1}, Refusals: map[string]int64{"busy": 2}, Memory: nodewatch.MemoryStatus{AvailableBytes: -1, PSIFullAvg10: -1}}},
		{"status frame", component("WSServerFrame"), stream.StatusFrame{Type: "status", ID: "c1", ExecutionState: "busy", Code: "1"}},
		{"output frame", component("WSServerFrame"), stream.OutputFrame{Type: "output", ID: "c1", Output: outputs[0]}},
		{"input frame", component("WSServerFrame"), stream.InputRequestFrame{Type: "input_request", ID: "c1", Prompt: "?"}},
		{"result frame", component("WSServerFrame"), session.ResultFrame{Type: "result", ID: "c1", Result: run}},
		{"event frame", component("WSServerFrame"), stream.EventFrame{Type: "event", Event: carryover.Event{SequenceNumber: 1, EventType: "heartbeat", Payload: json.RawMessage(`null`), CreatedAt: now}}},
		{"error frame", component("WSServerFrame"), stream.ErrorFrame{Type: "error", Error: carryover.Errorf(carryover.CodeInvalid, "x")}},
		{"running frame", component("WSServerFrame"), stream.RunningFrame{Type: "running", ID: "run-1", Code: "1", ExecutionCount: &n, Outputs: outputs,
			InputRequest: &stream.InputRequestFrame{Type: "input_request", ID: "run-1", Prompt: "?"}}},
		{"notice frame", component("WSServerFrame"), stream.NoticeFrame{Type: "notice", Message: "m", Dropped: 2}},
		{"pong frame", component("WSServerFrame"), pongFrame{Type: "pong", ID: "p"}},
	}
	for _, tc := range cases {
		sch, err := c.Compile(tc.loc)
		if err != nil {
			t.Fatalf("%s: %v", tc.loc, err)
		}
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s: %s does not validate against %s:\n%v", tc.what, b, tc.loc, err)
		}
	}
}

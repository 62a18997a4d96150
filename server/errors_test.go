package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestBadInput sends malformed, mistyped, oversized and hostile requests: each gets the right
// error in the API's shape and changes nothing. Requests the typed client can express go through
// it; malformed JSON, raw ".." paths and bad query values go raw.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "good", Data: map[string]any{"k": "v"}})
	ts.run("good", "x = 1")
	before := ts.session("good")
	events := ts.events("good", 0, 1000, "")

	c := ts.c
	const good = "good"
	noToken, wrongToken := newClient(ts.base, ""), newClient(ts.base, "nope")
	raw := func(method, path, body string) func(context.Context) error {
		return func(context.Context) error { return ts.raw(method, path, body).err() }
	}
	cases := []struct {
		name   string
		call   func(ctx context.Context) error
		status int
		code   string
	}{
		{"no token", func(ctx context.Context) error { return errOf(noToken.ListSessions(ctx)) }, 401, "unauthorized"},
		{"wrong token", func(ctx context.Context) error { return errOf(wrongToken.ListSessions(ctx)) }, 401, "unauthorized"},
		{"malformed json create", raw("POST", "/api/sessions", `{"session_id": "x"`), 400, "invalid_request"},
		{"wrong type create", raw("POST", "/api/sessions", `{"session_id": 5}`), 400, "invalid_request"},
		{"bad id", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{SessionID: "../etc"}))
		}, 400, "invalid_request"},
		{"bad id spaces", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{SessionID: "a b"}))
		}, 400, "invalid_request"},
		{"too long id", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{SessionID: strings.Repeat("a", 129)}))
		}, 400, "invalid_request"},
		{"unknown language", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{Language: "cobol"}))
		}, 400, "invalid_request"},
		{"bad sandbox memory", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{Sandbox: &client.SandboxRequest{Memory: "lots"}}))
		}, 400, "invalid_request"},
		{"bad sandbox cpus", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{Sandbox: &client.SandboxRequest{CPUs: "-2"}}))
		}, 400, "invalid_request"},
		{"negative budget", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{Budget: &client.Budget{IterationLimit: -1}}))
		}, 400, "invalid_request"},
		{"duplicate id", func(ctx context.Context) error {
			return errOf(c.CreateSession(ctx, client.CreateRequest{SessionID: good}))
		}, 409, "conflict"},
		{"unknown session get", func(ctx context.Context) error { return errOf(c.GetSession(ctx, "nope")) }, 404, "not_found"},
		{"unknown session run", func(ctx context.Context) error {
			return errOf(c.Run(ctx, "nope", client.RunRequest{Code: "1"}))
		}, 404, "not_found"},
		{"unknown session files", func(ctx context.Context) error { return errOf(c.ListFiles(ctx, "nope")) }, 404, "not_found"},
		{"malformed run", raw("POST", "/api/sessions/good/run", `{"code": `), 400, "invalid_request"},
		{"wrong type run", raw("POST", "/api/sessions/good/run", `{"code": 42}`), 400, "invalid_request"},
		{"wrong type update_data", raw("POST", "/api/sessions/good/run", `{"code": "1", "update_data": [1]}`), 400, "invalid_request"},
		{"bad timeout", func(ctx context.Context) error {
			return errOf(c.Run(ctx, good, client.RunRequest{Code: "1", TimeoutSeconds: client.Seconds(-3)}))
		}, 400, "invalid_request"},
		{"huge body", func(ctx context.Context) error {
			return errOf(c.Run(ctx, good, client.RunRequest{Code: strings.Repeat("x", 2<<20)}))
		}, 413, "payload_too_large"},
		{"huge file", func(ctx context.Context) error {
			return errOf(c.PutFile(ctx, good, "big.bin", []byte(strings.Repeat("x", 2<<20))))
		}, 413, "payload_too_large"},
		{"traversal dotdot", raw("GET", "/api/sessions/good/files/../../carryover.db", ""), 400, "invalid_request"},
		{"traversal encoded", raw("GET", "/api/sessions/good/files/%2e%2e/%2e%2e/carryover.db", ""), 400, "invalid_request"},
		{"traversal put", raw("PUT", "/api/sessions/good/files/a/%2e%2e/%2e%2e/evil.txt", "x"), 400, "invalid_request"},
		{"absolute outside", func(ctx context.Context) error {
			return errOf(c.PostFile(ctx, good, "/etc/passwd", "x", ""))
		}, 400, "invalid_request"},
		{"dotdot in post", func(ctx context.Context) error {
			return errOf(c.PostFile(ctx, good, "/workspace/../x", "x", ""))
		}, 400, "invalid_request"},
		{"bad base64", func(ctx context.Context) error {
			return errOf(c.PostFile(ctx, good, "a.bin", "!!!", "base64"))
		}, 400, "invalid_request"},
		{"missing file", func(ctx context.Context) error { return errOf(c.GetFile(ctx, good, "nothere.txt")) }, 404, "not_found"},
		{"bad context dir", func(ctx context.Context) error {
			dir := "/etc"
			return errOf(c.PatchContext(ctx, good, client.ContextRequest{WorkingDir: &dir}))
		}, 400, "invalid_request"},
		{"bad events limit", raw("GET", "/api/sessions/good/events?limit=-1", ""), 400, "invalid_request"},
		{"bad events order", raw("GET", "/api/sessions/good/events?order=newest", ""), 400, "invalid_request"},
		{"bad events before", raw("GET", "/api/sessions/good/events?before_sequence=x", ""), 400, "invalid_request"},
		{"bad tool schema", func(ctx context.Context) error {
			return errOf(c.RegisterTool(ctx, good, client.ToolRequest{Name: "t", InputSchema: map[string]any{"type": "banana"}}))
		}, 400, "invalid_request"},
		{"tool schema not object", func(ctx context.Context) error {
			return errOf(c.RegisterTool(ctx, good, client.ToolRequest{Name: "t", InputSchema: []any{1}}))
		}, 400, "invalid_request"},
		{"illegal transition", func(ctx context.Context) error { return errOf(c.Resume(ctx, good)) }, 409, "conflict"},
		{"unknown checkpoint", func(ctx context.Context) error {
			_, _, err := c.RestoreCheckpoint(ctx, good, "nope")
			return err
		}, 404, "not_found"},
		{"unknown endpoint", func(ctx context.Context) error { return c.Do(ctx, "GET", "/api/nothing", nil, nil) }, 404, "not_found"},
		{"exec bad command", func(ctx context.Context) error {
			return errOf(c.Exec(ctx, good, client.ExecRequest{Command: 5}))
		}, 400, "invalid_request"},
		{"reattach unknown", func(ctx context.Context) error { return errOf(c.Reattach(ctx, "ghost")) }, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errCode(t, tc.call(t.Context()), tc.status, tc.code)
		})
	}
	// Nothing changed: same session document (but last_activity-free fields), no new sessions, no new events.
	after := ts.session("good")
	if after.State != before.State {
		t.Errorf("session state changed: %v -> %v", before.State, after.State)
	}
	if after.ExecutionCount != before.ExecutionCount {
		t.Errorf("session execution_count changed: %v -> %v", before.ExecutionCount, after.ExecutionCount)
	}
	if after.Data["k"] != "v" || len(after.Data) != 1 {
		t.Errorf("data changed: %v", after.Data)
	}
	list := must(t, 200, "list", ts.c.ListSessions)
	if n := len(list); n != 1 {
		t.Errorf("%d sessions, want 1: %s", n, dump(list))
	}
	files := must(t, 200, "list files", func(ctx context.Context) ([]client.FileInfo, error) { return ts.c.ListFiles(ctx, good) })
	if n := len(files); n != 0 {
		t.Errorf("files appeared: %s", dump(files))
	}
	if evAfter := ts.events("good", 0, 1000, ""); len(evAfter) != len(events) {
		t.Errorf("events changed: %s", dump(evAfter))
	}
	if fileExists(ts.dir+"/evil.txt") || fileExists(ts.dir+"/workspaces/evil.txt") {
		t.Errorf("traversal wrote outside the workspace")
	}
	// The session still works.
	if r := ts.run("good", "print(x)"); r.Stdout != "1\n" {
		t.Fatalf("session broken after bad input: %s", dump(r))
	}
}

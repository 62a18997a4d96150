package server_test

import (
	"strings"
	"testing"
)

// errCode asserts the API error shape and code.
func errCode(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.Status != status || r.str("error", "code") != code || r.str("error", "message") == "" {
		t.Fatalf("want %d %s with a message, got %d: %s", status, code, r.Status, r.Body)
	}
}

// TestBadInput sends malformed, mistyped, oversized and hostile requests: each gets the right
// error in the API's shape and changes nothing.
func TestBadInput(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "good", "data": map[string]any{"k": "v"}})
	ts.run("good", "x = 1")
	before := ts.must(200, "GET", "/api/sessions/good", nil)
	events := ts.must(200, "GET", "/api/sessions/good/events?limit=1000", nil)

	cases := []struct {
		name         string
		method, path string
		body         any
		hdr          []string
		status       int
		code         string
	}{
		{"no token", "GET", "/api/sessions", nil, []string{"Authorization", ""}, 401, "unauthorized"},
		{"wrong token", "GET", "/api/sessions", nil, []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		{"malformed json create", "POST", "/api/sessions", `{"session_id": "x"`, nil, 400, "invalid_request"},
		{"wrong type create", "POST", "/api/sessions", `{"session_id": 5}`, nil, 400, "invalid_request"},
		{"bad id", "POST", "/api/sessions", map[string]any{"session_id": "../etc"}, nil, 400, "invalid_request"},
		{"bad id spaces", "POST", "/api/sessions", map[string]any{"session_id": "a b"}, nil, 400, "invalid_request"},
		{"too long id", "POST", "/api/sessions", map[string]any{"session_id": strings.Repeat("a", 129)}, nil, 400, "invalid_request"},
		{"unknown language", "POST", "/api/sessions", map[string]any{"language": "cobol"}, nil, 400, "invalid_request"},
		{"bad sandbox memory", "POST", "/api/sessions", map[string]any{"sandbox": map[string]any{"memory": "lots"}}, nil, 400, "invalid_request"},
		{"bad sandbox cpus", "POST", "/api/sessions", map[string]any{"sandbox": map[string]any{"cpus": "-2"}}, nil, 400, "invalid_request"},
		{"negative budget", "POST", "/api/sessions", map[string]any{"budget": map[string]any{"iteration_limit": -1}}, nil, 400, "invalid_request"},
		{"duplicate id", "POST", "/api/sessions", map[string]any{"session_id": "good"}, nil, 409, "conflict"},
		{"unknown session get", "GET", "/api/sessions/nope", nil, nil, 404, "not_found"},
		{"unknown session run", "POST", "/api/sessions/nope/run", map[string]any{"code": "1"}, nil, 404, "not_found"},
		{"unknown session files", "GET", "/api/sessions/nope/files", nil, nil, 404, "not_found"},
		{"malformed run", "POST", "/api/sessions/good/run", `{"code": `, nil, 400, "invalid_request"},
		{"wrong type run", "POST", "/api/sessions/good/run", `{"code": 42}`, nil, 400, "invalid_request"},
		{"wrong type update_data", "POST", "/api/sessions/good/run", `{"code": "1", "update_data": [1]}`, nil, 400, "invalid_request"},
		{"bad timeout", "POST", "/api/sessions/good/run", map[string]any{"code": "1", "timeout_seconds": -3}, nil, 400, "invalid_request"},
		{"huge body", "POST", "/api/sessions/good/run", `{"code": "` + strings.Repeat("x", 2<<20) + `"}`, nil, 413, "payload_too_large"},
		{"huge file", "PUT", "/api/sessions/good/files/big.bin", strings.Repeat("x", 2<<20), nil, 413, "payload_too_large"},
		{"traversal dotdot", "GET", "/api/sessions/good/files/../../carryover.db", nil, nil, 400, "invalid_request"},
		{"traversal encoded", "GET", "/api/sessions/good/files/%2e%2e/%2e%2e/carryover.db", nil, nil, 400, "invalid_request"},
		{"traversal put", "PUT", "/api/sessions/good/files/a/%2e%2e/%2e%2e/evil.txt", "x", nil, 400, "invalid_request"},
		{"absolute outside", "POST", "/api/sessions/good/files", map[string]any{"path": "/etc/passwd", "content": "x"}, nil, 400, "invalid_request"},
		{"dotdot in post", "POST", "/api/sessions/good/files", map[string]any{"path": "/workspace/../x", "content": "x"}, nil, 400, "invalid_request"},
		{"bad base64", "POST", "/api/sessions/good/files", map[string]any{"path": "a.bin", "content": "!!!", "encoding": "base64"}, nil, 400, "invalid_request"},
		{"missing file", "GET", "/api/sessions/good/files/nothere.txt", nil, nil, 404, "not_found"},
		{"bad context dir", "PATCH", "/api/sessions/good/context", map[string]any{"working_dir": "/etc"}, nil, 400, "invalid_request"},
		{"bad events limit", "GET", "/api/sessions/good/events?limit=-1", nil, nil, 400, "invalid_request"},
		{"bad tool schema", "POST", "/api/sessions/good/tools", map[string]any{"name": "t", "input_schema": map[string]any{"type": "banana"}}, nil, 400, "invalid_request"},
		{"tool schema not object", "POST", "/api/sessions/good/tools", map[string]any{"name": "t", "input_schema": []any{1}}, nil, 400, "invalid_request"},
		{"illegal transition", "POST", "/api/sessions/good/resume", nil, nil, 409, "conflict"},
		{"unknown checkpoint", "POST", "/api/sessions/good/checkpoints/nope/restore", nil, nil, 404, "not_found"},
		{"unknown endpoint", "GET", "/api/nothing", nil, nil, 404, "not_found"},
		{"exec bad command", "POST", "/api/sessions/good/exec", map[string]any{"command": 5}, nil, 400, "invalid_request"},
		{"reattach unknown", "POST", "/api/sessions/reattach", map[string]any{"client_id": "ghost"}, nil, 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errCode(t, ts.do(c.method, c.path, c.body, c.hdr...), c.status, c.code)
		})
	}
	// Nothing changed: same session document (but last_activity-free fields), no new sessions, no new events.
	after := ts.must(200, "GET", "/api/sessions/good", nil)
	for _, k := range []string{"state", "execution_count"} {
		if after.str("session", k) != before.str("session", k) {
			t.Errorf("session %s changed: %v -> %v", k, before.str("session", k), after.str("session", k))
		}
	}
	if after.str("session", "data", "k") != "v" || len(after.get("session", "data").(map[string]any)) != 1 {
		t.Errorf("data changed: %s", after.Body)
	}
	list := ts.must(200, "GET", "/api/sessions", nil)
	if n := len(list.get("sessions").([]any)); n != 1 {
		t.Errorf("%d sessions, want 1: %s", n, list.Body)
	}
	files := ts.must(200, "GET", "/api/sessions/good/files", nil)
	if n := len(files.get("files").([]any)); n != 0 {
		t.Errorf("files appeared: %s", files.Body)
	}
	evAfter := ts.must(200, "GET", "/api/sessions/good/events?limit=1000", nil)
	if len(evAfter.get("events").([]any)) != len(events.get("events").([]any)) {
		t.Errorf("events changed: %s", evAfter.Body)
	}
	if fileExists(ts.dir+"/evil.txt") || fileExists(ts.dir+"/workspaces/evil.txt") {
		t.Errorf("traversal wrote outside the workspace")
	}
	// The session still works.
	if r := ts.run("good", "print(x)"); r.str("stdout") != "1\n" {
		t.Fatalf("session broken after bad input: %s", r.Body)
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
)

// headerTransport adds an Authorization header to every request.
type headerTransport struct{ auth string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.auth != "" {
		r.Header.Set("Authorization", h.auth)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens an MCP session on ts's /mcp with the official Go SDK's client.
func mcpConnect(t *testing.T, ts *testServer, auth, query string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "carryover-test", Version: "1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: ts.base + "/mcp" + query, HTTPClient: &http.Client{Transport: headerTransport{auth}}}
	cs, err := c.Connect(ts.ctx(), tr, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type toolAnswer struct {
	isError bool
	text    string         // every text content, joined
	images  []string       // MIME types of the image contents
	out     map[string]any // structuredContent
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) toolAnswer {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	a := toolAnswer{isError: res.IsError}
	var texts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			texts = append(texts, c.Text)
		case *sdk.ImageContent:
			a.images = append(a.images, c.MIMEType)
		}
	}
	a.text = strings.Join(texts, "\n")
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &a.out)
	}
	return a
}

// ok calls a tool that must succeed.
func okTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) toolAnswer {
	t.Helper()
	a := callTool(t, cs, name, args)
	if a.isError {
		t.Fatalf("%s %v: isError: %s", name, args, a.text)
	}
	return a
}

func TestMCPTools(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) { c.Auth.Tenants = map[string]string{"other": "other-token"} })

	// The same auth as /api/: no token is a 401; ?token= and "token t" work too.
	res, err := http.Post(ts.base+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Fatalf("no token: status %d, want 401", res.StatusCode)
	}
	mcpConnect(t, ts, "", "?token="+testToken)
	mcpConnect(t, ts, "token "+testToken, "")

	cs := mcpConnect(t, ts, "Bearer "+testToken, "")
	t.Logf("negotiated protocol version %s with %s %s", cs.InitializeResult().ProtocolVersion,
		cs.InitializeResult().ServerInfo.Name, cs.InitializeResult().ServerInfo.Version)
	if v := cs.InitializeResult().ServerInfo.Version; v != carryover.Version {
		t.Errorf("MCP serverInfo.version %q, want carryover.Version %q", v, carryover.Version)
	}
	tl, err := cs.ListTools(ts.ctx(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"run_python", "run_shell", "read_file", "write_file", "list_files", "list_variables", "checkpoints", "restore_checkpoint", "fork_session"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list %v lacks %s", names, want)
		}
	}

	// run_python without a session creates one; the next call shares its state.
	a := okTool(t, cs, "run_python", map[string]any{"code": "x = 41\nprint('hi')"})
	id, _ := a.out["session_id"].(string)
	if id == "" || !strings.Contains(a.text, "hi") || !strings.Contains(a.text, "checkpoint") {
		t.Fatalf("first run: %+v", a)
	}
	cp1 := a.out["checkpoint"].(map[string]any)["id"].(string)
	a = okTool(t, cs, "run_python", map[string]any{"code": "x + 1", "session_id": id})
	if a.out["result"] != "42" || !strings.Contains(a.text, "42") {
		t.Fatalf("x + 1: %+v", a)
	}
	okTool(t, cs, "run_python", map[string]any{"code": "x = 100", "session_id": id})
	// stdin answers input(); past its end input() raises EOFError.
	a = okTool(t, cs, "run_python", map[string]any{"code": "a = input('a? ')\ntry:\n    input()\nexcept EOFError:\n    a += '+eof'\na", "session_id": id, "stdin": "yes\n"})
	if a.out["result"] != "'yes+eof'" || a.out["stdout"] != "" {
		t.Fatalf("stdin: %+v", a)
	}

	// A Python exception is a tool result with isError, not a protocol error.
	a = callTool(t, cs, "run_python", map[string]any{"code": "1/0", "session_id": id})
	if !a.isError || a.out["status"] != "error" || !strings.Contains(a.text, "ZeroDivisionError") || a.out["session_id"] != id {
		t.Fatalf("1/0: %+v", a)
	}

	// Shell, files.
	a = okTool(t, cs, "run_shell", map[string]any{"session_id": id, "command": "echo shell-$((6*7))"})
	if a.out["stdout"] != "shell-42\n" || a.out["exit_code"] != float64(0) {
		t.Fatalf("run_shell: %+v", a)
	}
	if a = callTool(t, cs, "run_shell", map[string]any{"session_id": id, "command": "exit 3"}); !a.isError || a.out["exit_code"] != float64(3) {
		t.Fatalf("exit 3: %+v", a)
	}
	// Output that is not UTF-8 is said to be so, and its exact bytes are in the structured content.
	a = okTool(t, cs, "run_shell", map[string]any{"session_id": id, "command": `printf 'ok\377\001'; printf 'e\376' >&2`})
	if a.out["stdout_base64"] != "b2v/AQ==" || a.out["stderr_base64"] != "Zf4=" ||
		!strings.Contains(a.text, "[stdout is 4 bytes that are not UTF-8") || !strings.Contains(a.text, "structuredContent.stderr_base64") {
		t.Fatalf("run_shell binary output: %+v", a)
	}
	if a = okTool(t, cs, "run_shell", map[string]any{"session_id": id, "command": "echo é"}); a.out["stdout_base64"] != nil || strings.Contains(a.text, "not UTF-8") {
		t.Fatalf("run_shell UTF-8 output: %+v", a)
	}
	// A command the session's interrupt kills says so.
	shell := make(chan toolAnswer, 1)
	go func() { shell <- callTool(t, cs, "run_shell", map[string]any{"session_id": id, "command": "sleep 60"}) }()
	waitFor(t, 30*time.Second, "exec_started", func() bool { return len(ts.eventTypes(id, 0, "exec_started")) >= 5 })
	mustDo(t, 200, "interrupt", func(ctx context.Context) error { return errOf(ts.c.Interrupt(ctx, id)) })
	if a = <-shell; !a.isError || a.out["interrupted"] != true || !strings.Contains(a.text, "interrupted") {
		t.Fatalf("run_shell interrupted: %+v", a)
	}
	okTool(t, cs, "write_file", map[string]any{"session_id": id, "path": "notes/a.txt", "content": "hello file"})
	if a = okTool(t, cs, "read_file", map[string]any{"session_id": id, "path": "notes/a.txt"}); a.out["content"] != "hello file" || a.out["encoding"] != "utf-8" {
		t.Fatalf("read_file: %+v", a)
	}
	if a = okTool(t, cs, "list_files", map[string]any{"session_id": id}); !strings.Contains(a.text, "notes/a.txt") {
		t.Fatalf("list_files: %+v", a)
	}
	if a = callTool(t, cs, "read_file", map[string]any{"session_id": id, "path": "../etc/passwd"}); !a.isError || !strings.HasPrefix(a.text, "invalid_request") {
		t.Fatalf("read_file ..: %+v", a)
	}

	// Variables and checkpoints.
	if a = okTool(t, cs, "list_variables", map[string]any{"session_id": id}); !slices.Contains(a.out["variables"].([]any), any("x")) {
		t.Fatalf("list_variables: %+v", a)
	}
	a = okTool(t, cs, "checkpoints", map[string]any{"session_id": id})
	if cps := a.out["checkpoints"].([]any); len(cps) < 3 {
		t.Fatalf("checkpoints: %+v", a)
	}
	okTool(t, cs, "restore_checkpoint", map[string]any{"session_id": id, "checkpoint_id": cp1})
	if a = okTool(t, cs, "run_python", map[string]any{"code": "x", "session_id": id}); a.out["result"] != "41" {
		t.Fatalf("after restore: %+v", a)
	}

	// Fork: the new session has the state; the two are independent.
	a = okTool(t, cs, "fork_session", map[string]any{"session_id": id, "new_session_id": "mcp-fork"})
	if a.out["session_id"] != "mcp-fork" {
		t.Fatalf("fork: %+v", a)
	}
	okTool(t, cs, "run_python", map[string]any{"code": "x = 7", "session_id": "mcp-fork"})
	if a = okTool(t, cs, "run_python", map[string]any{"code": "x", "session_id": id}); a.out["result"] != "41" {
		t.Fatalf("source after fork: %+v", a)
	}

	// After a restart, run_python says what the restore brought back and what it could not, in its
	// text and its structured content (a model learned of a lost variable from a NameError).
	okTool(t, cs, "run_python", map[string]any{"session_id": "mcp-fork",
		"code": "import os\ngen = (i for i in range(3))\nif os.path.exists('nothing'):\n    os.remove('nothing')"})
	mustDo(t, 200, "restart", func(ctx context.Context) error { return errOf(ts.c.Restart(ctx, "mcp-fork")) })
	a = okTool(t, cs, "run_python", map[string]any{"code": "x", "session_id": "mcp-fork"})
	if rep, _ := a.out["restore"].(map[string]any); a.out["result"] != "7" || rep == nil || rep["checkpoint_id"] == "" ||
		!strings.Contains(a.text, "restored from checkpoint ckpt_") || !strings.Contains(a.text, "not restored [gen (generator: not replayed: ") {
		t.Fatalf("run after a restart: %+v", a)
	}
	if a = okTool(t, cs, "run_python", map[string]any{"code": "x", "session_id": "mcp-fork"}); a.out["restore"] != nil || strings.Contains(a.text, "restored from") {
		t.Fatalf("the restore is told once: %+v", a)
	}

	// API errors are tool errors with the API's code.
	if a = callTool(t, cs, "list_files", map[string]any{"session_id": "nope"}); !a.isError || !strings.HasPrefix(a.text, "not_found") {
		t.Fatalf("unknown session: %+v", a)
	}
	// run_python's not_found says how to go on: leave session_id out to create one.
	if a = callTool(t, cs, "run_python", map[string]any{"code": "1", "session_id": "nope"}); !a.isError ||
		!strings.HasPrefix(a.text, "not_found") || !strings.Contains(a.text, "without session_id to create a new session") {
		t.Fatalf("run_python, unknown session: %+v", a)
	}
	if a = callTool(t, cs, "run_python", map[string]any{"session_id": id}); !a.isError || !strings.Contains(a.text, "code") {
		t.Fatalf("run_python without code: %+v", a)
	}
	if _, err := cs.CallTool(ts.ctx(), &sdk.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("an unknown tool is not a protocol error")
	}
	if a = callTool(t, cs, "fork_session", map[string]any{"session_id": id, "new_session_id": "mcp-fork"}); !a.isError || !strings.HasPrefix(a.text, "conflict") {
		t.Fatalf("fork onto an existing id: %+v", a)
	}
	a = okTool(t, cs, "fork_session", map[string]any{"session_id": id, "new_session_id": "mcp-kids", "count": 2})
	if ids, _ := a.out["session_ids"].([]any); len(ids) != 2 || ids[0] != "mcp-kids-1" || ids[1] != "mcp-kids-2" || a.out["session_id"] != "mcp-kids-1" {
		t.Fatalf("fork of 2: %+v", a)
	}
	if a = callTool(t, cs, "fork_session", map[string]any{"session_id": id, "count": 101}); !a.isError || !strings.HasPrefix(a.text, "invalid_request") {
		t.Fatalf("fork of 101: %+v", a)
	}
	if a = callTool(t, cs, "fork_session", map[string]any{"session_id": id, "count": 0}); !a.isError || !strings.HasPrefix(a.text, "invalid_request") {
		t.Fatalf("fork of 0: %+v", a)
	}

	// Tenancy: another tenant's token does not see the session, and cannot use this MCP session.
	other := mcpConnect(t, ts, "Bearer other-token", "")
	for tool, args := range map[string]map[string]any{"run_python": {"code": "x"}, "read_file": {"path": "notes/a.txt"},
		"list_variables": {}, "checkpoints": {}, "fork_session": {}, "restore_checkpoint": {"checkpoint_id": cp1}} {
		args["session_id"] = id
		if a = callTool(t, other, tool, args); !a.isError || !strings.HasPrefix(a.text, "not_found") {
			t.Fatalf("other tenant %s: %+v", tool, a)
		}
	}
	if a = okTool(t, other, "run_python", map[string]any{"code": "1"}); a.out["session_id"] == id {
		t.Fatalf("other tenant's new session: %+v", a)
	}
	errCode(t, errOf(ts.c.GetSession(ts.ctx(), a.out["session_id"].(string))), 404, "not_found")
	req, _ := http.NewRequest("POST", ts.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer other-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	if res, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("another tenant on this MCP session: status %d, want 403", res.StatusCode)
	}
}

// TestMCPNodeClient drives /mcp with the official TypeScript SDK (server/mcp/testdata/node).
func TestMCPNodeClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the MCP client test (every machine of this project has it): %v", err)
	}
	dir, _ := filepath.Abs(filepath.Join("mcp", "testdata", "node"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("@modelcontextprotocol/sdk is not installed: run `make web-deps` (cd server/mcp/testdata/node && npm install): %v", err)
	}
	ts := startServer(t, "")
	ctx, cancel := context.WithTimeout(ts.ctx(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), ts.base+"/mcp", testToken)
	out, err := cmd.CombinedOutput()
	t.Logf("node client:\n%s", out)
	if err != nil {
		t.Fatalf("node client: %v", err)
	}
}

package clustertest

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// bearer adds the test token (and extra headers) to every request of an MCP client.
type bearer struct{ extra http.Header }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range b.extra {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession opens an MCP session on n's /mcp with the Go SDK's client.
func mcpSession(t *testing.T, n *node, extra http.Header) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: n.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{extra}}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "clustertest", Version: "1"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("mcp connect to %s: %v", n.name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callText calls a tool and returns its text contents joined and whether it is an error result.
func callText(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

// TestMCPReachesOwner: an MCP tool call through node B about a session A owns runs on A's kernel
// (the variable A's REST set is there, the pid is A's kernel's, B never starts a kernel for it),
// and what it changes is seen through A's REST. A call already forwarded once (hop header) is
// not_owner on a node that does not serve the session, never forwarded again.
func TestMCPReachesOwner(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "m1"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "m1", "x = 41")
	if _, err := a.c.PutFile(t.Context(), "m1", "note.txt", []byte("written on a")); err != nil {
		t.Fatal(err)
	}
	pidA := kernelPID(t, a, "m1")

	cs := mcpSession(t, b, nil)
	text, isErr := callText(t, cs, "run_python", map[string]any{"session_id": "m1",
		"code": "x += 1\nimport os as _o\nprint(x, _o.getpid())\ndel _o"})
	if isErr {
		t.Fatalf("run_python through b: %s", text)
	}
	if !strings.Contains(text, "42 "+strconv.Itoa(pidA)) {
		t.Fatalf("run_python through b did not run in a's kernel (pid %d, x 41 -> 42): %q", pidA, text)
	}
	if text, isErr := callText(t, cs, "read_file", map[string]any{"session_id": "m1", "path": "note.txt"}); isErr || text != "written on a" {
		t.Fatalf("read_file through b: %v %q", isErr, text)
	}
	if out := strings.TrimSpace(run(t, a, "m1", "print(x)").Stdout); out != "42" {
		t.Fatalf("x through a's REST after b's MCP call: %q", out)
	}
	if st := hopStatus(t, b, "m1"); st != http.StatusMisdirectedRequest {
		t.Fatalf("b serves m1 itself after the MCP calls (hop GET answered %d, want 421)", st)
	}

	hop := mcpSession(t, b, http.Header{"X-Carryover-Hop": {"test"}})
	text, isErr = callText(t, hop, "list_variables", map[string]any{"session_id": "m1"})
	if !isErr || !strings.HasPrefix(text, "not_owner: ") {
		t.Fatalf("forwarded call on a non-owner: isError %v %q, want not_owner", isErr, text)
	}
}

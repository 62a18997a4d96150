package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carryover/carryover"
)

// Router places sessions on the nodes of a cluster (server/cluster's Node). A tool call about a
// session served by another node is forwarded to that node's /mcp, so exactly one kernel, the
// owner's, ever runs a session's code.
type Router interface {
	// Locate returns "" when this node serves session id (claiming it when nobody does), else the
	// base URL of its owner. header is the MCP request's: a call already forwarded by a node is
	// not_owner here rather than forwarded again.
	Locate(ctx context.Context, id string, header http.Header) (string, error)
	// ForwardHeader is what a node-to-node call carries (hop, cluster token).
	ForwardHeader() http.Header
}

// routing is the server's middleware that sends tools/call about another node's session to it.
// Calls without a session_id (run_python creating a session) run here: the creator owns it.
func (t *tools) routing(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		cr, ok := req.(*sdk.CallToolRequest)
		if !ok || method != "tools/call" || cr.Params == nil {
			return next(ctx, method, req)
		}
		var args struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(cr.Params.Arguments, &args) // bad arguments: the tool itself says so
		if args.SessionID == "" || cr.Extra == nil || cr.Extra.TokenInfo == nil {
			return next(ctx, method, req)
		}
		addr, err := t.router.Locate(ctx, args.SessionID, cr.Extra.Header)
		if err != nil {
			return toolError(err), nil
		}
		if addr == "" {
			return next(ctx, method, req)
		}
		res, err := t.forward(ctx, cr, addr)
		if err != nil {
			t.log.Warn("mcp call to owner failed", "session", args.SessionID, "owner", addr, "err", err)
			return toolError(carryover.Errorf(carryover.CodeNotOwner,
				"session %q is served by another node, which did not answer; retry", args.SessionID)), nil
		}
		return res, nil
	}
}

// forward makes the same tool call on the owner's /mcp, with the caller's own token (the owner
// checks it and its tenant) and the node-to-node headers, in a short MCP session of its own.
func (t *tools) forward(ctx context.Context, req *sdk.CallToolRequest, addr string) (*sdk.CallToolResult, error) {
	h := t.router.ForwardHeader().Clone()
	h.Set("Authorization", req.Extra.Header.Get("Authorization"))
	tr := &sdk.StreamableClientTransport{Endpoint: strings.TrimRight(addr, "/") + Path, DisableStandaloneSSE: true,
		MaxRetries: -1, HTTPClient: &http.Client{Transport: headerTransport{h: h, next: http.DefaultTransport}}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "carryover-node", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return cs.CallTool(ctx, &sdk.CallToolParams{Meta: req.Params.Meta, Name: req.Params.Name, Arguments: req.Params.Arguments})
}

// toolError is a failed call as the tools answer it: isError, the API's code first in its text.
func toolError(err error) *sdk.CallToolResult {
	e := carryover.ErrorOf(err)
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%s: %s", e.Code, e.Message)}}}
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	h    http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

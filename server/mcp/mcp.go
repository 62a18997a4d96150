// Package mcp is carryover's Model Context Protocol front door: an MCP server over the Streamable
// HTTP transport (github.com/modelcontextprotocol/go-sdk) whose tools call the session service
// (run_python, run_shell, files, variables, checkpoints, fork). It never reaches the store.
//
// Auth is the API's: the same tokens ("Authorization: Bearer t", "token t" or ?token=t), and the
// token's tenant scopes every session a tool names (another tenant's session is not_found). An MCP
// session is bound to the tenant that opened it (the SDK refuses it to another one).
package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carryover/carryover"
)

// Path is where the assembly mounts the handler.
const Path = "/mcp"

// SessionTimeout closes an MCP session (not the carryover sessions it used) after this long without
// a request; its client then gets 404 and initializes again.
const SessionTimeout = time.Hour

// Options configure the MCP front door.
type Options struct {
	// Authenticate finds the request's token and its tenant (the API's own check); ok false answers 401.
	Authenticate func(r *http.Request) (token, tenant string, ok bool)
	MaxBodyBytes int64  // request bodies above this answer 413 (0: the SDK's default)
	Version      string // the serverInfo version clients see (default carryover.Version)
	Logger       *slog.Logger
	// Router, in a cluster, forwards tool calls about sessions other nodes serve (route.go); nil on
	// one node.
	Router Router
}

// schemas holds the tools' JSON schemas, inferred from their Go types and resolved once per
// process: every server start would otherwise reflect and resolve the same eleven tools' schemas
// again (5 s of the CPU of server's tests, which start a few hundred servers, under the race
// detector).
var schemas = sdk.NewSchemaCache()

// Handler is the MCP endpoint over svc.
func Handler(svc Sessions, o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Version == "" {
		o.Version = carryover.Version
	}
	t := &tools{svc: svc, log: o.Logger, router: o.Router}
	srv := sdk.NewServer(&sdk.Implementation{Name: "carryover", Title: "carryover: persistent IPython sessions", Version: o.Version},
		&sdk.ServerOptions{Instructions: instructions, SchemaCache: schemas})
	t.register(srv)
	if o.Router != nil {
		srv.AddReceivingMiddleware(t.routing)
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{MaxRequestBodyBytes: o.MaxBodyBytes, SessionTimeout: SessionTimeout})
	// The SDK's bearer middleware carries the tenant into every tool call (TokenInfo.UserID) and binds
	// each MCP session to it; the token itself is checked by o.Authenticate, in front of it.
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		_, tenant, ok := o.Authenticate(r)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: tenant, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}
	bearer := auth.RequireBearerToken(verify, nil)(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _, ok := o.Authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="carryover"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": carryover.Errorf(carryover.CodeUnauthorized, "missing or wrong token")})
			return
		}
		// "token t" and ?token=t are accepted as on /api/: the SDK's middleware reads a bearer header.
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		bearer.ServeHTTP(w, r)
	})
}

const instructions = `carryover runs Python in persistent IPython sessions: variables, imports and workspace files ` +
	`survive between calls (each turn is checkpointed; a crashed kernel comes back with its last checkpoint). ` +
	`Call run_python without session_id to create a session, then pass the session_id it returns to every later call.`

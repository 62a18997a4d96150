package httpapi

import (
	"net/http"

	"github.com/carryover/carryover"
)

// routeScopes is the one table of what each route needs of a credential's scope (docs/tenants.md
// has it as a table too). A test checks that every route of routes() is in it; a route missing
// from it would need admin, so a forgotten entry locks out rather than opens up.
var routeScopes = map[string]carryover.Scope{
	"GET /healthz":          "", // outside /api/: no credential at all
	"GET /readyz":           "",
	"GET /metrics":          "",
	"GET /api/openapi.json": carryover.ScopeRead,

	// Reading: sessions, their records, files, checkpoints, variables, skills.
	"GET /api/sessions":                            carryover.ScopeRead,
	"GET /api/sessions/{id}":                       carryover.ScopeRead,
	"GET /api/sessions/{id}/events":                carryover.ScopeRead,
	"GET /api/sessions/{id}/executions":            carryover.ScopeRead,
	"GET /api/sessions/{id}/notebook":              carryover.ScopeRead,
	"GET /api/sessions/{id}/tools":                 carryover.ScopeRead,
	"GET /api/sessions/{id}/checkpoints":           carryover.ScopeRead,
	"GET /api/sessions/{id}/checkpoints/{cid}":     carryover.ScopeRead,
	"GET /api/sessions/{id}/usage":                 carryover.ScopeRead,
	"GET /api/sessions/{id}/variables":             carryover.ScopeRead,
	"GET /api/sessions/{id}/variables/{name}/rows": carryover.ScopeRead, // pages a frame; runs no user code
	"GET /api/sessions/{id}/files":                 carryover.ScopeRead,
	"GET /api/sessions/{id}/files/{path...}":       carryover.ScopeRead,
	"GET /api/skills":                              carryover.ScopeRead,
	"GET /api/skills/{path...}":                    carryover.ScopeRead,

	// Running: make sessions, run code and commands in them, write their files. The websocket
	// is here, not under read: its run frames run code.
	"POST /api/sessions":                        carryover.ScopeRun,
	"POST /api/sessions/reattach":               carryover.ScopeRun,
	"POST /api/execute":                         carryover.ScopeRun,
	"POST /api/sessions/{id}/run":               carryover.ScopeRun,
	"POST /api/sessions/{id}/complete":          carryover.ScopeRun, // the kernel evaluates names to complete them
	"POST /api/sessions/{id}/exec":              carryover.ScopeRun,
	"POST /api/sessions/{id}/notebook":          carryover.ScopeRun,
	"POST /api/sessions/{id}/interrupt":         carryover.ScopeRun,
	"POST /api/sessions/{id}/start":             carryover.ScopeRun,
	"POST /api/sessions/{id}/resume":            carryover.ScopeRun,
	"POST /api/sessions/{id}/heartbeat":         carryover.ScopeRun,
	"POST /api/sessions/{id}/checkpoint":        carryover.ScopeRun,
	"POST /api/sessions/{id}/tools":             carryover.ScopeRun,
	"PATCH /api/sessions/{id}/context":          carryover.ScopeRun,
	"POST /api/sessions/{id}/files":             carryover.ScopeRun,
	"PUT /api/sessions/{id}/files/{path...}":    carryover.ScopeRun,
	"DELETE /api/sessions/{id}/files/{path...}": carryover.ScopeRun,
	"GET /api/sessions/{id}/ws":                 carryover.ScopeRun,

	// The tenant's own: end, delete, reshape, move back in time, fork sessions; write skills.
	"PATCH /api/sessions/{id}":                          carryover.ScopeTenant,
	"DELETE /api/sessions/{id}":                         carryover.ScopeTenant,
	"POST /api/sessions/{id}/pause":                     carryover.ScopeTenant,
	"POST /api/sessions/{id}/restart":                   carryover.ScopeTenant,
	"POST /api/sessions/{id}/rotate":                    carryover.ScopeTenant,
	"POST /api/sessions/{id}/hibernate":                 carryover.ScopeTenant,
	"POST /api/sessions/{id}/stop":                      carryover.ScopeTenant,
	"POST /api/sessions/{id}/cancel":                    carryover.ScopeTenant,
	"POST /api/sessions/{id}/fork":                      carryover.ScopeTenant,
	"GET /api/sessions/{id}/export":                     carryover.ScopeTenant, // all of a session's state, out
	"POST /api/sessions/import":                         carryover.ScopeTenant,
	"POST /api/sessions/{id}/checkpoints/{cid}/restore": carryover.ScopeTenant,
	"PUT /api/skills/{path...}":                         carryover.ScopeTenant,
	"DELETE /api/skills/{path...}":                      carryover.ScopeTenant,

	// Every tenant's keys.
	"POST /api/admin/keys":        carryover.ScopeAdmin,
	"GET /api/admin/keys":         carryover.ScopeAdmin,
	"DELETE /api/admin/keys/{id}": carryover.ScopeAdmin,
	// The node's load (every tenant's kernels, memory, the pool): the operator's view.
	"GET /api/status": carryover.ScopeAdmin,
}

// scopeOf is the scope route pattern needs: admin for a pattern missing from routeScopes.
func scopeOf(pattern string) carryover.Scope {
	s, ok := routeScopes[pattern]
	if !ok {
		return carryover.ScopeAdmin
	}
	return s
}

// scoped refuses, with 403 forbidden, a request whose credential's scope does not reach what
// pattern needs. Routes outside /api/ (no credential) pass.
func scoped(pattern string, h http.Handler) http.Handler {
	need := scopeOf(pattern)
	if need == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := credentialFrom(r.Context())
		if !ok || !c.scope.Allows(need) {
			writeError(w, carryover.Errorf(carryover.CodeForbidden, "this credential's scope %q does not allow %s %s (it needs %q)",
				c.scope, r.Method, r.URL.Path, need).WithDetails("scope", string(c.scope), "required_scope", string(need)))
			return
		}
		h.ServeHTTP(w, r)
	})
}

package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/carryover/carryover"
)

// rejectDotDot answers 400 for API paths with ".." segments (raw or percent-encoded) before the
// mux would clean them into some other resource: a traversal attempt gets a clear error.
func rejectDotDot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			for _, seg := range strings.Split(r.URL.Path, "/") {
				if seg == ".." || seg == "." {
					writeError(w, carryover.Errorf(carryover.CodeInvalid, "path may not contain %q segments", seg).WithDetails("path", r.URL.Path))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a 500 in the API's error shape: no Go trace reaches a client.
func (a *API) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("panic in handler", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeError(w, carryover.Errorf(carryover.CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// tokenOf extracts the token: "Bearer t", "token t", or ?token=t.
func tokenOf(r *http.Request) string {
	h := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "bearer ", "token ", "Token "} {
		if strings.HasPrefix(h, p) {
			return strings.TrimSpace(h[len(p):])
		}
	}
	return r.URL.Query().Get("token")
}

// configCredential finds the config token t (auth.token, auth.tenants), comparing every one in
// constant time. The admin token (auth.token) has admin scope, the tenants' tokens tenant scope.
func (a *API) configCredential(t string) (credential, bool) {
	found := ""
	for tok, tenant := range a.tenants {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			found = tenant
		}
	}
	if t == "" || found == "" {
		return credential{}, false
	}
	scope := carryover.ScopeTenant
	if a.admin != "" && subtle.ConstantTimeCompare([]byte(t), []byte(a.admin)) == 1 {
		scope = carryover.ScopeAdmin
	}
	return credential{tenant: found, scope: scope, id: "token:" + found}, true
}

// credentialOf is the credential of token t: a config token, else an API key of the store. ok is
// false for a missing, unknown, revoked or expired one; err is a store failure.
func (a *API) credentialOf(ctx context.Context, t string) (credential, bool, error) {
	if c, ok := a.configCredential(t); ok {
		return c, true, nil
	}
	k, ok, err := a.keys.verify(ctx, t)
	if !ok || err != nil {
		return credential{}, false, err
	}
	return credential{tenant: k.Tenant, scope: k.Scope, id: k.ID}, true, nil
}

// Authenticate is the API's token check for the cluster router: the request's token ("Bearer t",
// "token t" or ?token=t) and its tenant; ok is false for a missing or unknown token. Any scope
// passes: the API behind the router checks each route's scope.
func (a *API) Authenticate(r *http.Request) (token, tenant string, ok bool) {
	token = tokenOf(r)
	c, ok, _ := a.credentialOf(r.Context(), token)
	return token, c.tenant, ok
}

// AuthenticateRun is Authenticate for the front doors that run code without a table of scopes
// (MCP, Jupyter): only credentials that may run code (run, tenant, admin) pass.
func (a *API) AuthenticateRun(r *http.Request) (token, tenant string, ok bool) {
	token = tokenOf(r)
	c, ok, _ := a.credentialOf(r.Context(), token)
	if !ok || !c.scope.Allows(carryover.ScopeRun) {
		return token, "", false
	}
	return token, c.tenant, true
}

// auth guards /api/ with the credentials (config tokens and API keys), the rate limit, and scopes
// the request to the credential's tenant: a session of another tenant answers 404, exactly like one
// that does not exist. What a route needs of the credential's scope is checked by scoped.
func (a *API) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			c, ok, err := a.credentialOf(r.Context(), tokenOf(r))
			if err != nil {
				a.fail(w, r, fmt.Errorf("checking an API key: %w", err))
				return
			}
			if !ok {
				writeError(w, carryover.Errorf(carryover.CodeUnauthorized, "missing or wrong token"))
				return
			}
			if ok, wait := a.limiter.take(c.id); !ok {
				secs := int(math.Ceil(wait.Seconds()))
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				writeError(w, carryover.Errorf(carryover.CodeRateLimited,
					"this credential is over its rate limit of %g requests a second (bursts of %g); retry in %d s", a.limiter.rate, a.limiter.burst, secs).
					WithDetails("limit", a.limiter.rate, "burst", a.limiter.burst, "retry_after_seconds", secs))
				return
			}
			if id := sessionIDOf(r.Method, r.URL.Path); id != "" && !a.svc.Visible(id, c.tenant) {
				writeError(w, carryover.Errorf(carryover.CodeNotFound, "session %q not found", id).WithDetails("session_id", id))
				return
			}
			r = r.WithContext(withCredential(r.Context(), c))
		}
		next.ServeHTTP(w, r)
	})
}

// sessionIDOf returns the {id} of /api/sessions/{id}[/...] ("" for other paths, and for the two
// routes that name no session: POST /api/sessions/reattach and POST /api/sessions/import). A
// session may be named "import" or "reattach": its own routes are still session routes.
func sessionIDOf(method, p string) string {
	rest, ok := strings.CutPrefix(p, "/api/sessions/")
	if !ok {
		return ""
	}
	if method == http.MethodPost && (rest == "reattach" || rest == "import") {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

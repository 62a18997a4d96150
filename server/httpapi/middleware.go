package httpapi

import (
	"crypto/subtle"
	"fmt"
	"net/http"
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

// tenantOf finds the tenant of a token, comparing every known token in constant time.
func (a *API) tenantOf(t string) (string, bool) {
	found := ""
	for tok, tenant := range a.tenants {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			found = tenant
		}
	}
	return found, t != "" && found != ""
}

// Authenticate is the API's token check for other front doors (MCP): the request's token ("Bearer t",
// "token t" or ?token=t) and its tenant; ok is false for a missing or unknown token.
func (a *API) Authenticate(r *http.Request) (token, tenant string, ok bool) {
	token = tokenOf(r)
	tenant, ok = a.tenantOf(token)
	return token, tenant, ok
}

// auth guards /api/ with the tokens and scopes the request to the token's tenant: a session of
// another tenant answers 404, exactly like one that does not exist.
func (a *API) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			tenant, ok := a.tenantOf(tokenOf(r))
			if !ok {
				writeError(w, carryover.Errorf(carryover.CodeUnauthorized, "missing or wrong token"))
				return
			}
			if id := sessionIDOf(r.URL.Path); id != "" && !a.svc.Visible(id, tenant) {
				writeError(w, carryover.Errorf(carryover.CodeNotFound, "session %q not found", id).WithDetails("session_id", id))
				return
			}
			r = r.WithContext(carryover.NewContextWithTenant(r.Context(), tenant))
		}
		next.ServeHTTP(w, r)
	})
}

// sessionIDOf returns the {id} of /api/sessions/{id}[/...] ("" for other paths and "reattach").
func sessionIDOf(p string) string {
	rest, ok := strings.CutPrefix(p, "/api/sessions/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	if id == "reattach" {
		return ""
	}
	return id
}

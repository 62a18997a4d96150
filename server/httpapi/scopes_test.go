package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

// TestRouteScopesCoverRoutes: every route the API registers is in the one scope table, and the
// table names no route that does not exist (a stale entry would hide a missing one).
func TestRouteScopesCoverRoutes(t *testing.T) {
	a := New(nil, Options{})
	served := map[string]bool{}
	for _, rt := range a.routes() {
		served[rt.pattern] = true
		if _, ok := routeScopes[rt.pattern]; !ok {
			t.Errorf("route %q has no entry in routeScopes", rt.pattern)
		}
		if strings.HasPrefix(strings.Fields(rt.pattern)[1], "/api/") && routeScopes[rt.pattern] == "" {
			t.Errorf("route %q under /api/ needs no scope", rt.pattern)
		}
	}
	for p := range routeScopes {
		if !served[p] {
			t.Errorf("routeScopes names %q, which no route serves", p)
		}
	}
}

// TestScopeTable pins what each scope may do: read keys read and cannot run code, exec, write
// files or create sessions; run keys cannot delete sessions or manage keys; only admin manages keys.
func TestScopeTable(t *testing.T) {
	cases := []struct {
		pattern string
		allowed carryover.Scope // the weakest scope allowed
	}{
		{"GET /api/sessions", carryover.ScopeRead},
		{"GET /api/sessions/{id}/events", carryover.ScopeRead},
		{"GET /api/sessions/{id}/files/{path...}", carryover.ScopeRead},
		{"POST /api/sessions", carryover.ScopeRun},
		{"POST /api/sessions/{id}/run", carryover.ScopeRun},
		{"POST /api/sessions/{id}/exec", carryover.ScopeRun},
		{"POST /api/execute", carryover.ScopeRun},
		{"PUT /api/sessions/{id}/files/{path...}", carryover.ScopeRun},
		{"GET /api/sessions/{id}/ws", carryover.ScopeRun},
		{"DELETE /api/sessions/{id}", carryover.ScopeTenant},
		{"PUT /api/skills/{path...}", carryover.ScopeTenant},
		{"POST /api/admin/keys", carryover.ScopeAdmin},
		{"DELETE /api/admin/keys/{id}", carryover.ScopeAdmin},
		{"GET /api/no-such-route", carryover.ScopeAdmin}, // unknown patterns lock out
	}
	for _, c := range cases {
		need := scopeOf(c.pattern)
		for _, s := range carryover.Scopes {
			want := s.Allows(c.allowed)
			if got := s.Allows(need); got != want {
				t.Errorf("%s with scope %s: allowed %v, want %v", c.pattern, s, got, want)
			}
		}
		if carryover.Scope("").Allows(need) || carryover.Scope("root").Allows(need) {
			t.Errorf("%s: an empty or unknown scope is allowed", c.pattern)
		}
	}
}

// TestScopedRefuses: scoped answers 403 forbidden in the error shape, naming both scopes, and lets
// a strong enough credential through.
func TestScopedRefuses(t *testing.T) {
	reached := false
	h := scoped("POST /api/sessions/{id}/run", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	for _, c := range []struct {
		scope carryover.Scope
		want  int
	}{{carryover.ScopeRead, 403}, {carryover.ScopeRun, 200}, {carryover.ScopeAdmin, 200}} {
		reached = false
		r := httptest.NewRequest("POST", "/api/sessions/s/run", nil)
		r = r.WithContext(withCredential(r.Context(), credential{tenant: "t", scope: c.scope, id: "k"}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want || reached != (c.want == 200) {
			t.Fatalf("scope %s: status %d, handler reached %v; want %d", c.scope, w.Code, reached, c.want)
		}
		if c.want == 403 && (!strings.Contains(w.Body.String(), `"code":"forbidden"`) || !strings.Contains(w.Body.String(), `"required_scope":"run"`)) {
			t.Fatalf("403 body %s lacks the code or the required scope", w.Body)
		}
	}
}

package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/configs"
)

// TestTenantsSeeOnlyTheirSessions: a token of another tenant gets 404 for every route of a session
// it does not own, does not list it, cannot reattach to it; its own sessions work as usual.
func TestTenantsSeeOnlyTheirSessions(t *testing.T) {
	ts := startServer(t, "", func(c *configs.Config) { c.Auth.Tenants = map[string]string{"acme": "acme-token"} })
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "mine", "client_id": "cli"})
	ts.run("mine", "secret = 42\nopen('s.txt','w').write('x')")
	acme := func(method, path string, body any) resp {
		return ts.do(method, path, body, "Authorization", "Bearer acme-token")
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/sessions/mine"}, {"POST", "/api/sessions/mine/run"}, {"GET", "/api/sessions/mine/files"},
		{"GET", "/api/sessions/mine/files/s.txt"}, {"GET", "/api/sessions/mine/events"}, {"DELETE", "/api/sessions/mine"},
		{"GET", "/api/sessions/mine/checkpoints"}, {"POST", "/api/sessions/mine/stop"}, {"PATCH", "/api/sessions/mine"},
	} {
		errCode(t, acme(c.method, c.path, map[string]any{"code": "secret", "data": map[string]any{}}), 404, "not_found")
	}
	u := strings.Replace(ts.base, "http://", "ws://", 1) + "/api/sessions/mine/ws?token=acme-token"
	if _, res, err := websocket.DefaultDialer.Dial(u, http.Header{}); err == nil || res == nil || res.StatusCode != 404 {
		t.Fatalf("websocket of another tenant's session: %v", err)
	}
	if r := acme("GET", "/api/sessions", nil); len(r.get("sessions").([]any)) != 0 {
		t.Fatalf("list leaks: %s", r.Body)
	}
	errCode(t, acme("POST", "/api/sessions/reattach", map[string]any{"client_id": "cli"}), 404, "not_found")
	// acme's own session works and is acme's.
	r := acme("POST", "/api/sessions", map[string]any{"session_id": "theirs"})
	if r.Status != 201 || r.str("session", "tenant") != "acme" {
		t.Fatalf("create: %s", r.Body)
	}
	if r := acme("POST", "/api/sessions/theirs/run", map[string]any{"code": "'secret' in dir()"}); r.str("result") != "False" {
		t.Fatalf("run: %s", r.Body)
	}
	errCode(t, ts.do("GET", "/api/sessions/theirs", nil), 404, "not_found")
	if n := len(ts.must(200, "GET", "/api/sessions", nil).get("sessions").([]any)); n != 1 {
		t.Fatalf("default tenant lists %d sessions", n)
	}
	// The owner still has everything.
	if r := ts.run("mine", "secret"); r.str("result") != "42" {
		t.Fatalf("%s", r.Body)
	}
}

package server_test

import (
	"context"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// TestTenantsSeeOnlyTheirSessions: a token of another tenant gets 404 for every route of a session
// it does not own, does not list it, cannot reattach to it; its own sessions work as usual.
func TestTenantsSeeOnlyTheirSessions(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) { c.Auth.Tenants = map[string]string{"acme": "acme-token"} })
	ts.newSession(client.CreateRequest{SessionID: "mine", ClientID: "cli"})
	ts.run("mine", "secret = 42\nopen('s.txt','w').write('x')")
	acme := newClient(ts.base, "acme-token")
	const mine = "mine"
	for _, c := range []struct {
		route string
		call  func(ctx context.Context) error
	}{
		{"GET /api/sessions/mine", func(ctx context.Context) error { return errOf(acme.GetSession(ctx, mine)) }},
		{"POST /api/sessions/mine/run", func(ctx context.Context) error {
			return errOf(acme.Run(ctx, mine, client.RunRequest{Code: "secret"}))
		}},
		{"GET /api/sessions/mine/files", func(ctx context.Context) error { return errOf(acme.ListFiles(ctx, mine)) }},
		{"GET /api/sessions/mine/files/s.txt", func(ctx context.Context) error { return errOf(acme.GetFile(ctx, mine, "s.txt")) }},
		{"GET /api/sessions/mine/events", func(ctx context.Context) error { return errOf(acme.Events(ctx, mine, 0, 0, "")) }},
		{"DELETE /api/sessions/mine", func(ctx context.Context) error { return acme.DeleteSession(ctx, mine) }},
		{"GET /api/sessions/mine/checkpoints", func(ctx context.Context) error { return errOf(acme.Checkpoints(ctx, mine)) }},
		{"POST /api/sessions/mine/stop", func(ctx context.Context) error { return errOf(acme.Stop(ctx, mine, "")) }},
		{"PATCH /api/sessions/mine", func(ctx context.Context) error {
			return errOf(acme.PatchSession(ctx, mine, map[string]any{}))
		}},
	} {
		t.Logf("%s as acme", c.route)
		errCode(t, c.call(t.Context()), 404, "not_found")
	}
	// The websocket, with the token in the query (as browsers send it) and in the header.
	if res, err := ts.rawWS(mine, "?token=acme-token", nil); err == nil || res == nil || res.StatusCode != 404 {
		t.Fatalf("websocket of another tenant's session: %v", err)
	}
	if conn, err := acme.Connect(t.Context(), mine); err == nil {
		conn.Close()
		t.Fatalf("websocket of another tenant's session accepted")
	} else {
		errCode(t, err, 404, "not_found")
	}
	if l := must(t, 200, "list as acme", acme.ListSessions); len(l) != 0 {
		t.Fatalf("list leaks: %s", dump(l))
	}
	errCode(t, errOf(acme.Reattach(t.Context(), "cli")), 404, "not_found")
	// acme's own session works and is acme's.
	s := must(t, 201, "create as acme", func(ctx context.Context) (*client.Session, error) {
		return acme.CreateSession(ctx, client.CreateRequest{SessionID: "theirs"})
	})
	if s.Tenant != "acme" {
		t.Fatalf("create: %s", dump(s))
	}
	r := must(t, 200, "run as acme", func(ctx context.Context) (*client.RunResult, error) {
		return acme.Run(ctx, "theirs", client.RunRequest{Code: "'secret' in dir()"})
	})
	if resultOf(r) != "False" {
		t.Fatalf("run: %s", dump(r))
	}
	errCode(t, errOf(ts.c.GetSession(t.Context(), "theirs")), 404, "not_found")
	if n := len(must(t, 200, "list", ts.c.ListSessions)); n != 1 {
		t.Fatalf("default tenant lists %d sessions", n)
	}
	// The owner still has everything.
	if r := ts.run(mine, "secret"); resultOf(r) != "42" {
		t.Fatalf("%s", dump(r))
	}
}

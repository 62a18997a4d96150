package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

// createKey makes an API key with the admin token.
func (ts *testServer) createKey(tenant, scope string) *client.CreatedKey {
	ts.t.Helper()
	return must(ts.t, 201, "create "+scope+" key of "+tenant, func(ctx context.Context) (*client.CreatedKey, error) {
		return ts.c.CreateKey(ctx, client.CreateKeyRequest{Tenant: tenant, Scope: scope})
	})
}

// TestKeyScopes: a read key reads its tenant's sessions and cannot run code, exec, write files,
// create sessions or open the websocket (403 forbidden); a run key does those but cannot delete a
// session or manage keys; a tenant token of the config (auth.tenants) keeps doing everything on its
// tenant's sessions but cannot manage keys; the admin token (auth.token) can.
func TestKeyScopes(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) { c.Auth.Tenants = map[string]string{"acme": "acme-token"} })
	acmeTok := newClient(ts.base, "acme-token")
	id := servertest.ID(t)
	must(t, 201, "create as acme", func(ctx context.Context) (*client.Session, error) {
		return acmeTok.CreateSession(ctx, client.CreateRequest{SessionID: id})
	})
	must(t, 200, "run as acme", func(ctx context.Context) (*client.RunResult, error) {
		return acmeTok.Run(ctx, id, client.RunRequest{Code: "open('f.txt','w').write('hi'); v = 7"})
	})

	read := newClient(ts.base, ts.createKey("acme", client.ScopeRead).Secret)
	if s := must(t, 200, "get with a read key", func(ctx context.Context) (*client.Session, error) { return read.GetSession(ctx, id) }); s.ID != id {
		t.Fatalf("get: %s", dump(s))
	}
	if l := must(t, 200, "list with a read key", read.ListSessions); len(l) != 1 {
		t.Fatalf("list: %s", dump(l))
	}
	if b := must(t, 200, "read a file with a read key", func(ctx context.Context) ([]byte, error) { return read.GetFile(ctx, id, "f.txt") }); string(b) != "hi" {
		t.Fatalf("file: %q", b)
	}
	must(t, 200, "events with a read key", func(ctx context.Context) ([]client.Event, error) { return read.Events(ctx, id, 0, 0, "") })
	for _, c := range []struct {
		what string
		call func(ctx context.Context) error
	}{
		{"run", func(ctx context.Context) error { return errOf(read.Run(ctx, id, client.RunRequest{Code: "v = 8"})) }},
		{"exec", func(ctx context.Context) error { return errOf(read.Exec(ctx, id, client.ExecRequest{Command: "true"})) }},
		{"execute", func(ctx context.Context) error { return errOf(read.Execute(ctx, client.ExecuteRequest{Code: "1"})) }},
		{"write a file", func(ctx context.Context) error { return errOf(read.PutFile(ctx, id, "g.txt", []byte("x"))) }},
		{"create a session", func(ctx context.Context) error {
			return errOf(read.CreateSession(ctx, client.CreateRequest{SessionID: servertest.ID(t) + "-r"}))
		}},
		{"delete the session", func(ctx context.Context) error { return read.DeleteSession(ctx, id) }},
		{"websocket", func(ctx context.Context) error {
			conn, err := read.Connect(ctx, id)
			if err == nil {
				conn.Close()
			}
			return err
		}},
		{"list keys", func(ctx context.Context) error { return errOf(read.ListKeys(ctx, "")) }},
	} {
		t.Logf("%s with a read key", c.what)
		errCode(t, c.call(t.Context()), 403, "forbidden")
	}
	if r := must(t, 200, "run as acme", func(ctx context.Context) (*client.RunResult, error) {
		return acmeTok.Run(ctx, id, client.RunRequest{Code: "v"})
	}); resultOf(r) != "7" {
		t.Fatalf("the refused run ran: %s", dump(r))
	}

	run := newClient(ts.base, ts.createKey("acme", client.ScopeRun).Secret)
	rid := servertest.ID(t) + "-run"
	must(t, 201, "create with a run key", func(ctx context.Context) (*client.Session, error) {
		return run.CreateSession(ctx, client.CreateRequest{SessionID: rid})
	})
	if r := must(t, 200, "run with a run key", func(ctx context.Context) (*client.RunResult, error) {
		return run.Run(ctx, rid, client.RunRequest{Code: "1+1"})
	}); resultOf(r) != "2" {
		t.Fatalf("run: %s", dump(r))
	}
	errCode(t, run.DeleteSession(t.Context(), rid), 403, "forbidden")
	errCode(t, errOf(run.CreateKey(t.Context(), client.CreateKeyRequest{Tenant: "acme", Scope: "admin"})), 403, "forbidden")
	errCode(t, errOf(acmeTok.CreateKey(t.Context(), client.CreateKeyRequest{Tenant: "acme", Scope: "admin"})), 403, "forbidden")
	mustDo(t, 204, "delete as the acme token", func(ctx context.Context) error { return acmeTok.DeleteSession(ctx, rid) })
	// A key is its tenant's only: the default tenant's sessions are not there.
	ts.newSession(client.CreateRequest{SessionID: servertest.ID(t) + "-default"})
	if l := must(t, 200, "list with a read key", read.ListSessions); len(l) != 1 || l[0].ID != id {
		t.Fatalf("acme's read key lists %s", dump(l))
	}
}

// TestKeysHashedAtRest: the database file holds a key's SHA-256 and never its secret, before and
// after the key was used; the listing shows its prefix, not the secret.
func TestKeysHashedAtRest(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	k := ts.createKey("acme", client.ScopeRun)
	kc := newClient(ts.base, k.Secret)
	must(t, 200, "list with the key", kc.ListSessions)
	keys := must(t, 200, "list keys", func(ctx context.Context) ([]client.Key, error) { return ts.c.ListKeys(ctx, "acme") })
	if len(keys) != 1 || keys[0].ID != k.ID || keys[0].Prefix != k.Secret[:12] {
		t.Fatalf("keys: %s", dump(keys))
	}
	if raw := dumpRaw(t, ts, "/api/admin/keys"); strings.Contains(raw, k.Secret[12:]) || strings.Contains(raw, "hash") {
		t.Fatalf("the listing shows the secret or its hash: %s", raw)
	}
	ts.stop() // the WAL is checkpointed into the file: everything is in carryover.db
	var db []byte
	for _, name := range []string{"carryover.db", "carryover.db-wal"} {
		b, err := os.ReadFile(filepath.Join(ts.dir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		db = append(db, b...)
	}
	sum := sha256.Sum256([]byte(k.Secret))
	if !bytes.Contains(db, []byte(hex.EncodeToString(sum[:]))) {
		t.Fatal("the database does not hold the key's hash: the test reads the wrong file")
	}
	if bytes.Contains(db, []byte(k.Secret)) || bytes.Contains(db, []byte(k.Secret[12:])) {
		t.Fatal("the database holds the key's secret")
	}
}

// dumpRaw is the raw body of GET path with the admin token.
func dumpRaw(t *testing.T, ts *testServer, path string) string {
	t.Helper()
	var raw []byte
	if err := ts.c.Do(t.Context(), http.MethodGet, path, nil, &raw); err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestKeyScopesOtherDoors: /mcp and /jupyter/ run code through every tool and channel, so they take
// credentials of scope run and above: a read key is refused there (401, as an unknown token), a run
// key is let in.
func TestKeyScopesOtherDoors(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	read, run := ts.createKey("acme", client.ScopeRead), ts.createKey("acme", client.ScopeRun)
	status := func(method, path, token, body string) int {
		req, _ := http.NewRequestWithContext(t.Context(), method, ts.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		method, path, body string
	}{{"GET", "/jupyter/api/kernels", ""}, {"POST", "/mcp", initialize}} {
		if st := status(c.method, c.path, read.Secret, c.body); st != 401 {
			t.Errorf("%s %s with a read key: %d, want 401", c.method, c.path, st)
		}
		if st := status(c.method, c.path, run.Secret, c.body); st != 200 {
			t.Errorf("%s %s with a run key: %d, want 200", c.method, c.path, st)
		}
	}
}

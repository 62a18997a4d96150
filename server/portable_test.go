package server_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

// TestExportImportQuotasAndTenants: an export of an older checkpoint imports as a session at that
// state, writing no chunk into the store that holds them already; an import into another server
// counts against the tenant's stored_bytes and sessions quotas (refused with 429 naming the quota,
// leaving no session); another tenant's session cannot be exported; an unknown checkpoint answers
// 404 and a taken id 409.
func TestExportImportQuotasAndTenants(t *testing.T) {
	t.Parallel()
	tenants := func(c *configs.Config) {
		c.Auth.Tenants = map[string]string{"small": "small-token", "big": "big-token"}
		stored := int64(1 << 20)
		c.Tenants = map[string]configs.TenantConfig{"small": {Quotas: configs.TenantQuotas{Sessions: intp(1), StoredBytes: &stored}}}
	}
	ts, other := startServer(t, "", tenants), startServer(t, "", tenants)
	big := newClient(ts.base, "big-token")
	small := newClient(other.base, "small-token")
	ctx := t.Context()
	id := servertest.ID(t)
	if _, err := big.CreateSession(ctx, client.CreateRequest{SessionID: id, Name: "src"}); err != nil {
		t.Fatal(err)
	}
	first, err := big.Run(ctx, id, client.RunRequest{Code: "import os\nblob = os.urandom(3 << 20)\nx = 1"})
	if err != nil || first.Status != "ok" {
		t.Fatalf("%v %+v", err, first)
	}
	if r, err := big.Run(ctx, id, client.RunRequest{Code: "x = 2"}); err != nil || r.Status != "ok" {
		t.Fatalf("%v %+v", err, r)
	}
	var old bytes.Buffer
	if err := big.ExportSession(ctx, id, first.Checkpoint.ID, &old); err != nil {
		t.Fatal(err)
	}

	// small: 3 MiB of new chunks are over its 1 MiB stored_bytes.
	_, err = small.ImportSession(ctx, bytes.NewReader(old.Bytes()), id+"-small")
	quotaErr(t, err, "stored_bytes", 1<<20)
	if ss, err := small.ListSessions(ctx); err != nil || len(ss) != 0 {
		t.Fatalf("small holds %d sessions after a refused import (%v)", len(ss), err)
	}
	if _, err := small.CreateSession(ctx, client.CreateRequest{SessionID: id + "-s1"}); err != nil {
		t.Fatal(err)
	}
	_, err = small.ImportSession(ctx, bytes.NewReader(old.Bytes()), id+"-small")
	quotaErr(t, err, "sessions", 1)

	// big: the old checkpoint's state, in a new session.
	res, err := big.ImportSession(ctx, bytes.NewReader(old.Bytes()), id+"-old")
	if err != nil {
		t.Fatal(err)
	}
	if res.Source.CheckpointID != first.Checkpoint.ID || res.Session.Name != "src" || res.Session.ExecutionCount < 1 ||
		res.ChunksPresent != res.Chunks || res.BytesWritten != 0 {
		t.Fatalf("import answer %+v", res)
	}
	r, err := big.Run(ctx, id+"-old", client.RunRequest{Code: "print(x, len(blob))"})
	if err != nil || strings.TrimSpace(r.Stdout) != "1 3145728" {
		t.Fatalf("the imported session prints %q (%v), want the old checkpoint's x = 1", r.Stdout, err)
	}

	var e *client.Error
	if err := newClient(ts.base, "small-token").ExportSession(ctx, id, "", &bytes.Buffer{}); !errors.As(err, &e) || e.Status != 404 {
		t.Fatalf("another tenant's export: %v, want 404", err)
	}
	if err := big.ExportSession(ctx, id, "ckpt_nope", &bytes.Buffer{}); !errors.As(err, &e) || e.Status != 404 {
		t.Fatalf("an unknown checkpoint: %v, want 404", err)
	}
	if _, err := big.ImportSession(ctx, bytes.NewReader(old.Bytes()), id); !errors.As(err, &e) || e.Status != 409 {
		t.Fatalf("a taken id: %v, want 409", err)
	}
}

// TestSessionsNamedLikeRoutes: sessions named "import" and "reattach" are sessions like any other:
// their routes are scoped to their tenant (another tenant's GET answers 404), while POST
// /api/sessions/import and /reattach stay the routes that name no session.
func TestSessionsNamedLikeRoutes(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) { c.Auth.Tenants = map[string]string{"a": "a-token", "b": "b-token"} })
	a, b := newClient(ts.base, "a-token"), newClient(ts.base, "b-token")
	for _, id := range []string{"import", "reattach"} {
		if _, err := a.CreateSession(t.Context(), client.CreateRequest{SessionID: id, Name: "secret"}); err != nil {
			t.Fatal(err)
		}
		if s, err := a.GetSession(t.Context(), id); err != nil || s.Name != "secret" {
			t.Fatalf("the owner's GET of %s: %v", id, err)
		}
		var e *client.Error
		if _, err := b.GetSession(t.Context(), id); !errors.As(err, &e) || e.Status != 404 {
			t.Fatalf("another tenant's GET of the session %q: %v, want 404", id, err)
		}
	}
	if _, err := b.Reattach(t.Context(), "nobody"); !errors.As(err, new(*client.Error)) {
		t.Fatalf("reattach: %v", err)
	}
	var e *client.Error
	if _, err := b.ImportSession(t.Context(), strings.NewReader("not an archive"), ""); !errors.As(err, &e) || e.Status != 400 {
		t.Fatalf("POST /api/sessions/import: %v, want 400", err)
	}
}

// TestExportNeverRan: a session with no checkpoint has nothing to export: 409 saying so.
func TestExportNeverRan(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	id := servertest.ID(t)
	ts.newSession(client.CreateRequest{SessionID: id})
	var e *client.Error
	if err := ts.c.ExportSession(t.Context(), id, "", &bytes.Buffer{}); !errors.As(err, &e) || e.Status != 409 || !strings.Contains(e.Message, "no checkpoint to export") {
		t.Fatalf("export of a session that never ran: %v", err)
	}
}

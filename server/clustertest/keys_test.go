package clustertest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/servertest"
)

// keyCacheTTL is how long a node may trust a key it verified (httpapi's keyCacheTTL).
const keyCacheTTL = 500 * time.Millisecond

// apiCode is the API error code and HTTP status of err ("" and 0 for nil or another error).
func apiCode(err error) (string, int) {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code, e.Status
	}
	return "", 0
}

// TestKeysAcrossNodes: a key made on node A works on node B at once (the store is shared), on a
// session either node serves; a read key cannot run code on either; the keys table holds hashes,
// never a secret; a key revoked through A is refused by A at once and by B within a second (B
// trusts a verified key for keyCacheTTL at most). Not parallel: it asserts that second.
func TestKeysAcrossNodes(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	ctx := t.Context()
	k, err := a.c.CreateKey(ctx, client.CreateKeyRequest{Tenant: "acme", Scope: client.ScopeTenant, Name: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := a.c.CreateKey(ctx, client.CreateKeyRequest{Tenant: "acme", Scope: client.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	onA, onB := client.New(a.base, k.Secret), client.New(b.base, k.Secret)
	id := servertest.ID(t)
	if _, err := onB.CreateSession(ctx, client.CreateRequest{SessionID: id}); err != nil {
		t.Fatalf("create with the key on b: %v", err)
	}
	if r := runAs(t, onB, id, "v = 41 + 1; v"); r.Result == nil || *r.Result != "42" {
		t.Fatalf("run on b: %+v", r)
	}
	if s, err := onA.GetSession(ctx, id); err != nil || s.Tenant != "acme" || s.OwnerNode != "b" {
		t.Fatalf("get through a (proxied to b): %+v, %v", s, err)
	}
	for _, n := range []*node{a, b} {
		_, err := client.New(n.base, ro.Secret).Run(ctx, id, client.RunRequest{Code: "v = 0"})
		if code, st := apiCode(err); code != "forbidden" || st != 403 {
			t.Fatalf("run with a read key through %s: %v", n.name, err)
		}
		if _, err := client.New(n.base, ro.Secret).GetSession(ctx, id); err != nil {
			t.Fatalf("get with a read key through %s: %v", n.name, err)
		}
	}
	if r := runAs(t, onA, id, "v"); r.Result == nil || *r.Result != "42" {
		t.Fatalf("the refused runs changed v: %+v", r)
	}
	keys, err := b.c.ListKeys(ctx, "acme")
	if err != nil || len(keys) != 2 || keys[0].ID != k.ID || keys[0].Prefix != k.Secret[:12] {
		t.Fatalf("keys listed on b: %+v, %v", keys, err)
	}
	checkKeysTable(t, dsn, k.Secret, ro.Secret)

	if err := a.c.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if _, err := onA.ListSessions(ctx); !isUnauthorized(err) {
		t.Fatalf("a, at once after the revocation through a: %v", err)
	}
	// Until keyCacheTTL has passed b may still accept the key; after it, b must refuse it, well
	// inside the second the revocation is promised in.
	time.Sleep(time.Until(revoked.Add(keyCacheTTL + 50*time.Millisecond)))
	for _, n := range []*node{a, b} {
		if _, err := client.New(n.base, k.Secret).ListSessions(ctx); !isUnauthorized(err) {
			t.Fatalf("%s, %v after the revocation: %v", n.name, time.Since(revoked), err)
		}
		if _, err := client.New(n.base, k.Secret).Run(ctx, id, client.RunRequest{Code: "1"}); !isUnauthorized(err) {
			t.Fatalf("run through %s with the revoked key: %v", n.name, err)
		}
	}
	if err := b.c.RevokeKey(ctx, k.ID); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("revoking again through b: %v, want not_found", err)
	}
}

// runAs runs code in session id through c, which must answer ok.
func runAs(t *testing.T, c *client.Client, id, code string) *client.RunResult {
	t.Helper()
	r, err := c.Run(t.Context(), id, client.RunRequest{Code: code})
	if err != nil || r.Status != "ok" {
		t.Fatalf("run %q in %s: %+v, %v", code, id, r, err)
	}
	return r
}

func isUnauthorized(err error) bool {
	code, st := apiCode(err)
	return code == "unauthorized" && st == 401
}

// checkKeysTable reads every row of api_keys as text: each secret's SHA-256 is there, no secret
// (nor its random part past the listed prefix) is.
func checkKeysTable(t *testing.T, dsn string, secrets ...string) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var dump string
	if err := db.QueryRowContext(context.Background(), `SELECT string_agg(t::text, E'\n') FROM api_keys t`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		sum := sha256.Sum256([]byte(s))
		if !strings.Contains(dump, hex.EncodeToString(sum[:])) {
			t.Fatalf("api_keys lacks the hash of a key:\n%s", dump)
		}
		if strings.Contains(dump, s[12:]) {
			t.Fatalf("api_keys holds a secret:\n%s", dump)
		}
	}
}

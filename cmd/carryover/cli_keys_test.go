package main

import (
	"strings"
	"testing"
)

// TestCLIKeys: keys create prints the secret alone on stdout; the key works as a token and its
// scope holds (a read key cannot run code, nor manage keys); keys list shows the prefix and never
// the secret; after keys revoke the secret is refused.
func TestCLIKeys(t *testing.T) {
	tenant := "cli-" + strings.ToLower(t.Name())
	r := must(t, "keys", "create", "--tenant", tenant, "--scope", "read", "--name", "ro", "--expires", "24h")
	secret := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(secret, "cok_") || strings.Contains(secret, "\n") || !strings.Contains(r.stderr, "shown this once") {
		t.Fatalf("keys create: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if r := must(t, "sessions", "ls", "--token", secret); strings.Contains(r.stdout, "cli-test") {
		t.Fatalf("a key of tenant %s lists another tenant's sessions: %s", tenant, r.stdout)
	}
	id := sessionID(t)
	r = carry(t, "", "run", "--token", secret, "-s", id, "-c", "1+1")
	if r.code != 2 || !strings.Contains(r.stderr, "forbidden (403)") {
		t.Fatalf("run with a read key: exit %d, stderr %q; want 2 and forbidden (403)", r.code, r.stderr)
	}
	if r := carry(t, "", "keys", "list", "--token", secret); r.code != 2 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("keys list with a read key: exit %d, stderr %q", r.code, r.stderr)
	}
	r = must(t, "keys", "list", "--tenant", tenant)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], tenant) || !strings.Contains(lines[1], secret[:12]) || strings.Contains(r.stdout, secret[12:]) {
		t.Fatalf("keys list:\n%s", r.stdout)
	}
	keyID := strings.Fields(lines[1])[0]
	if r := must(t, "keys", "revoke", keyID); !strings.Contains(r.stdout, "revoked "+keyID) {
		t.Fatalf("keys revoke: %+v", r)
	}
	if r := carry(t, "", "sessions", "ls", "--token", secret); r.code != 2 || !strings.Contains(r.stderr, "unauthorized (401)") {
		t.Fatalf("a revoked key: exit %d, stderr %q; want unauthorized", r.code, r.stderr)
	}
	if r := carry(t, "", "keys", "create", "--tenant", tenant, "--scope", "root"); r.code != 2 || !strings.Contains(r.stderr, "invalid_request") {
		t.Fatalf("an unknown scope: exit %d, stderr %q", r.code, r.stderr)
	}
}

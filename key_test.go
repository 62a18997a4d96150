package carryover

import (
	"strings"
	"testing"
)

// TestNewKey: secrets are distinct, have the documented shape, and the key keeps only their hash
// and the listed prefix.
func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		k, secret, err := NewKey("acme", ScopeRun, "n", nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[secret] || seen[k.ID] {
			t.Fatalf("secret or id repeated: %s %s", secret, k.ID)
		}
		seen[secret], seen[k.ID] = true, true
		if !IsKeySecret(secret) || len(secret) != 47 || !strings.HasPrefix(k.ID, "key_") {
			t.Fatalf("shape: secret %q id %q", secret, k.ID)
		}
		if k.Hash != KeyHash(secret) || len(k.Hash) != 64 || k.Prefix != secret[:12] || strings.Contains(k.Hash, secret[12:]) {
			t.Fatalf("key %+v of secret %q", k, secret)
		}
	}
	for _, s := range []string{"", "cok_", "token", "cok_" + strings.Repeat("a", 42)} {
		if IsKeySecret(s) {
			t.Fatalf("IsKeySecret(%q)", s)
		}
	}
}

// TestScopesNest: each scope allows itself and the weaker ones, never a stronger one; an unknown
// scope allows nothing.
func TestScopesNest(t *testing.T) {
	for i, have := range Scopes {
		for j, need := range Scopes {
			if got := have.Allows(need); got != (i >= j) {
				t.Errorf("%s allows %s: %v", have, need, got)
			}
		}
		if Scope("root").Allows(have) || Scope("").Allows(have) {
			t.Errorf("an unknown scope allows %s", have)
		}
	}
}

package carryover

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// API keys are tenants' credentials issued at run time (POST /api/admin/keys), beside the tokens of
// the config file. A key is a 256-bit random secret shown once, when it is created; the store keeps
// only its SHA-256. A fast hash is enough here, and the right choice: bcrypt and its kin slow down
// the guessing of low-entropy passwords, but nobody can enumerate 2^256 secrets whatever the hash
// costs, while a slow hash would cost every request milliseconds of CPU.

// KeySecretPrefix starts every API key secret, so a leaked one is recognisable (secret scanners) and
// the front door can tell a key from a config token without a lookup.
const KeySecretPrefix = "cok_"

// keyPrefixLen is how much of a secret a listing shows (the marker and 8 random characters): enough
// for a human to tell keys apart, far too little to guess the rest.
const keyPrefixLen = len(KeySecretPrefix) + 8

// Scope is what a credential may do. Scopes nest: each one allows everything the ones before it do.
type Scope string

// The scopes, weakest first (docs/tenants.md lists what each one allows).
const (
	ScopeRead   Scope = "read"   // read the tenant's sessions, events, files, checkpoints, skills
	ScopeRun    Scope = "run"    // and create sessions, run code and commands, write files
	ScopeTenant Scope = "tenant" // and everything else on the tenant's sessions and skills
	ScopeAdmin  Scope = "admin"  // and manage the API keys of every tenant
)

// Scopes lists the scopes, weakest first.
var Scopes = []Scope{ScopeRead, ScopeRun, ScopeTenant, ScopeAdmin}

func (s Scope) rank() int {
	for i, x := range Scopes {
		if x == s {
			return i + 1
		}
	}
	return 0
}

// Valid reports whether s is one of Scopes.
func (s Scope) Valid() bool { return s.rank() > 0 }

// Allows reports whether a credential of scope s may do what needs scope need.
func (s Scope) Allows(need Scope) bool { return s.Valid() && s.rank() >= need.rank() }

// APIKey is a key as the store keeps it: never the secret, only its hash.
type APIKey struct {
	ID         string     `json:"id"`
	Tenant     string     `json:"tenant"`
	Name       string     `json:"name,omitempty"`
	Scope      Scope      `json:"scope"`
	Prefix     string     `json:"prefix"` // the secret's first characters, to tell keys apart
	Hash       string     `json:"-"`      // KeyHash of the secret
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// Expired reports whether k is past its expiry at now.
func (k APIKey) Expired(now time.Time) bool { return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) }

// KeyStore keeps the API keys, shared by every node of a cluster (a key made or revoked on one node
// holds on all of them).
type KeyStore interface {
	// CreateKey stores k (ID and Hash set; a zero CreatedAt means now); CodeConflict if its ID or
	// Hash is taken.
	CreateKey(ctx context.Context, k APIKey) error
	// KeyByHash returns the key whose secret hashes to hash; CodeNotFound if there is none.
	KeyByHash(ctx context.Context, hash string) (APIKey, error)
	// ListKeys returns the keys of tenant (every tenant's when tenant is ""), oldest first.
	ListKeys(ctx context.Context, tenant string) ([]APIKey, error)
	// DeleteKey revokes a key: it is gone from the store; CodeNotFound if there is none.
	DeleteKey(ctx context.Context, id string) error
	// TouchKey sets the key's last use to at; a key deleted meanwhile is no error.
	TouchKey(ctx context.Context, id string, at time.Time) error
}

// NewKey makes a key for tenant with scope and returns it with its secret, which exists nowhere
// else: the caller hands it to the user once and stores k.
func NewKey(tenant string, scope Scope, name string, expires *time.Time) (k APIKey, secret string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return APIKey{}, "", fmt.Errorf("random key: %w", err)
	}
	secret = KeySecretPrefix + base64.RawURLEncoding.EncodeToString(b)
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return APIKey{}, "", fmt.Errorf("random key id: %w", err)
	}
	k = APIKey{ID: "key_" + hex.EncodeToString(id), Tenant: tenant, Name: name, Scope: scope,
		Prefix: secret[:keyPrefixLen], Hash: KeyHash(secret), CreatedAt: time.Now().UTC().Round(0), ExpiresAt: expires}
	return k, secret, nil
}

// IsKeySecret reports whether token has the shape of an API key secret.
func IsKeySecret(token string) bool {
	return strings.HasPrefix(token, KeySecretPrefix) && len(token) == keyPrefixLen-8+43
}

// KeyHash is what the store keeps of a secret: hex SHA-256.
func KeyHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

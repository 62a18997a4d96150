package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Error codes of tenants and keys (docs/tenants.md).
const (
	CodeForbidden     = "forbidden"      // 403: the credential's scope does not allow the request
	CodeQuotaExceeded = "quota_exceeded" // 429: a tenant quota; Details "quota", "limit", "use"
	CodeRateLimited   = "rate_limited"   // 429: the credential's rate limit; a Retry-After header
)

// The scopes of an API key, weakest first; each allows everything the ones before it do.
const (
	ScopeRead   = "read"
	ScopeRun    = "run"
	ScopeTenant = "tenant"
	ScopeAdmin  = "admin"
)

// Key is an API key as listed: never its secret.
type Key struct {
	ID         string     `json:"id"`
	Tenant     string     `json:"tenant"`
	Name       string     `json:"name,omitempty"`
	Scope      string     `json:"scope"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// CreatedKey is a key just made, with its secret: the only time the server shows it.
type CreatedKey struct {
	ID         string     `json:"id"`
	Tenant     string     `json:"tenant"`
	Name       string     `json:"name,omitempty"`
	Scope      string     `json:"scope"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Secret     string     `json:"secret"`
}

// CreateKeyRequest is the body of CreateKey. Tenant and Scope are required.
type CreateKeyRequest struct {
	Tenant    string     `json:"tenant"`
	Scope     string     `json:"scope"`
	Name      string     `json:"name,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// keysAnswer is the answer of GET /api/admin/keys.
type keysAnswer struct {
	Keys []Key `json:"keys"`
}

// CreateKey makes an API key (admin scope). Keep the answer's Secret: it cannot be shown again.
func (c *Client) CreateKey(ctx context.Context, req CreateKeyRequest) (*CreatedKey, error) {
	var out CreatedKey
	if err := c.Do(ctx, http.MethodPost, "/api/admin/keys", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListKeys lists the API keys of tenant, or of every tenant when tenant is "" (admin scope).
func (c *Client) ListKeys(ctx context.Context, tenant string) ([]Key, error) {
	p := "/api/admin/keys"
	if tenant != "" {
		p += "?tenant=" + url.QueryEscape(tenant)
	}
	var out keysAnswer
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// RevokeKey revokes an API key (admin scope): every node refuses it within a second.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/api/admin/keys/"+url.PathEscape(id), nil, nil)
}

package session

import (
	"context"

	"github.com/carryover/carryover"
)

// Tenants: every token belongs to one tenant (auth.token to "default", auth.tenants name their
// own), and a tenant sees only its sessions. The API layer puts the tenant in the request context;
// the service stamps it on new sessions and filters lists and reattach by it.

const defaultTenant = "default"

type tenantKey struct{}

func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantFrom is the request's tenant; internal callers (no tenant in ctx) act as the default one.
func tenantFrom(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok && t != "" {
		return t
	}
	return carryover.DefaultTenant
}


// visible reports whether tenant may see session id. Unknown ids are "visible" so the handlers
// answer their own 404 (or create them).
func (s *Service) visible(id, tenant string) bool {
	s.mu.Lock()
	ls, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok {
		return true
	}
	doc := ls.snapshot()
	return doc.TenantName() == tenant
}

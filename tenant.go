package carryover

import "context"

// Tenants: every token belongs to one tenant (auth.token to DefaultTenant, auth.tenants name their
// own), and a tenant sees only its sessions. A front door puts the tenant in the request context;
// the session service stamps it on new sessions and filters lists and reattach by it.

type tenantKey struct{}

// NewContextWithTenant returns ctx carrying tenant.
func NewContextWithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFromContext is the request's tenant; internal callers (no tenant in ctx) act as the default one.
func TenantFromContext(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok && t != "" {
		return t
	}
	return DefaultTenant
}

package quota

import (
	"context"
)

// AdmitCreateN checks the sessions quota of tenant for n more sessions at once (a fork fan-out),
// all or none: when the tenant cannot hold all n, it is refused (quota_exceeded, with "requested"
// n in its details) and nothing is admitted. Like AdmitCreate, the tenant's other creates wait
// until the caller calls release, once its sessions are stored (or failed to be), so they cannot
// slip in between the check and the stores. n <= 1 is AdmitCreate.
func (g *Gate) AdmitCreateN(ctx context.Context, tenant string, n int) (release func(), err error) {
	if n <= 1 {
		return g.AdmitCreate(ctx, tenant)
	}
	return g.admitCreate(ctx, tenant, n)
}

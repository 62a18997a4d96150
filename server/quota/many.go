package quota

import (
	"context"
	"fmt"
	"sync"

	"github.com/carryover/carryover"
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
	q := g.Of(tenant)
	if q.Sessions <= 0 {
		return func() {}, nil
	}
	m, _ := g.createMu.LoadOrStore(tenant, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	all, err := g.usage.Sessions(ctx)
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	use := 0
	for _, d := range all {
		if d.TenantName() == tenant {
			use++
		}
	}
	if use+n > q.Sessions {
		mu.Unlock()
		e := carryover.QuotaError(tenant, carryover.QuotaSessions, q.Sessions, use)
		e.Message = fmt.Sprintf("%s; %d new sessions asked, room for %d: none was created", e.Message, n, max(q.Sessions-use, 0))
		return nil, e.WithDetails("requested", n)
	}
	return mu.Unlock, nil
}

package session

import (
	"context"

	"github.com/carryover/carryover"
)

// Tenant quotas (Config.Quotas, docs/tenants.md) are checked by package quota (sessions by
// Create and Fork, stored_bytes and cpu_seconds as a turn is admitted) and, for live_kernels, by
// the node's ledger as a kernel is claimed (takeKernel). quotaUsage is what package quota counts
// from.
type quotaUsage struct{ s *Service }

// Sessions is every session of the store (ListAll: of every node, in a cluster).
func (u quotaUsage) Sessions(ctx context.Context) ([]carryover.Session, error) {
	return u.s.ListAll(ctx)
}

// CheckpointBytes is what the kept checkpoints of session id wrote.
func (u quotaUsage) CheckpointBytes(ctx context.Context, id string) (int64, error) {
	cps, err := u.s.store.ListCheckpoints(ctx, id)
	if err != nil {
		return 0, err
	}
	return sumCheckpointBytes(cps), nil
}

// tenant is the session's tenant.
func (ls *Session) tenant() string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.doc.TenantName()
}

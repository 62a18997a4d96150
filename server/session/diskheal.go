package session

import (
	"context"

	"github.com/carryover/carryover/server/session/kernels"
)

// healDisk repairs the session's workspace disk before a turn when a full host failed it
// (kernels.Factory.HealDisk). The caller holds ls.lock.
func (ls *Session) healDisk(ctx context.Context) error {
	return ls.svc.kern.HealDisk(ls.id, func() { ls.releaseKernel(ctx, kernels.DiskRepaired) })
}

package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/capacity"
)

// A node holds at most capacity.max_live_kernels kernels attached to sessions (docs/capacity.md),
// and a tenant at most its live_kernels quota. Every kernel the service claims (a new session's, a
// hibernated one's wake, a rotation's, a checkpoint restore's, an ephemeral run's) is claimed by
// takeKernel: a lease of the node's ledger (server/capacity: the tenant's limit, then a slot,
// hibernating the least recently used idle session on a full node, else a queue by fair share),
// then a kernel; stopKernel gives the lease back. A lease is held exactly while carryover_kernels_live counts
// the kernel.

// kernelClaim is one claim of a kernel.
type kernelClaim struct {
	doc    carryover.Session // the session the kernel is for (an ephemeral run's throwaway one)
	runEnv map[string]string // the env of the run that claims it (kernels.Factory.Claim)
	// replaces is the kernel the new one replaces (a rotation): it does not count against the
	// tenant's limit while both live.
	replaces *kernel.Kernel
	// leased, when set, is called once the lease is held, before the kernel is claimed (a session
	// says it is starting); its error gives the lease back.
	leased func() error
}

// takeKernel is the one claim of a kernel: the lease (the tenant's limit, then a node slot), then a
// kernel (kernels.Factory.Claim), counted live. A refusal or a failed start leaves nothing held.
func (s *Service) takeKernel(ctx context.Context, c kernelClaim) (*kernel.Kernel, error) {
	tenant := c.doc.TenantName()
	lease, err := s.adm.ledger.Acquire(ctx, capacity.Claim{Tenant: tenant, Limit: s.adm.quota.Of(tenant).LiveKernels,
		Replaces: s.adm.leaseOf(c.replaces)}, func(ctx context.Context) bool {
		// A full node: hibernate the best idle victim (a tenant over its fair share first).
		_, ok := s.evictIdle(ctx, capacity.ReasonCapacity)
		return ok
	})
	if err != nil {
		return nil, s.adm.refusal(c.doc.ID, err)
	}
	if c.leased != nil {
		if err := c.leased(); err != nil {
			lease.Release()
			return nil, err
		}
	}
	k, err := s.kern.Claim(ctx, c.doc, c.runEnv)
	if err != nil {
		lease.Release()
		return nil, s.adm.startFailed(ctx, s.cfg.StartupTimeout, err)
	}
	s.adm.leases.Store(k, lease)
	s.adm.live.Inc()
	return k, nil
}

// leaseOf is the lease k holds (nil for nil or a kernel that holds none).
func (a *admission) leaseOf(k *kernel.Kernel) *capacity.Lease {
	if k == nil {
		return nil
	}
	le, _ := a.leases.Load(k)
	lease, _ := le.(*capacity.Lease)
	return lease
}

// releaseLease gives back the lease k held (takeKernel), once its process is gone.
func (a *admission) releaseLease(k *kernel.Kernel) {
	if le, ok := a.leases.LoadAndDelete(k); ok {
		le.(*capacity.Lease).Release()
		a.live.Dec()
	}
}

// startFailed is the error of a kernel that could not be started for a session. A start that ran
// out of its own time (timeout: kernel.startup_timeout_seconds) while the request still had time is an
// overloaded node: a 429 capacity answer with Retry-After, counted with the other refusals.
func (a *admission) startFailed(ctx context.Context, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return a.ledger.RefuseStart(timeout, err)
	}
	return &carryover.Error{Code: carryover.CodeInternal, Message: fmt.Sprintf("no kernel could be started for the session: %v", err), Err: err}
}

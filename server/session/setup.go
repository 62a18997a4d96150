package session

import (
	"context"
	"strings"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/agentops"
	"github.com/carryover/carryover/server/session/kernels"
)

// A brand-new session's first cell in a fresh kernel carries the session's set-up (working directory
// and env vars) in its execute_request's metadata, applied by the snapshot agent's pre_run_cell hook,
// instead of a set-up request of its own before it: create -> first result is one kernel round trip
// shorter. It applies only where the kernel's execution counter is already right (a kernel that has
// run no cell, for a session that has run none): ipykernel announces the counter in execute_input
// before any hook runs, so a counter that must change still takes the request of its own.

// setupKey is the execute_request metadata key the agent reads the set-up from.
const setupKey = "carryover_setup"

// pendingSetup is a set-up not yet applied to kernel k.
type pendingSetup struct {
	k     *kernel.Kernel
	setup kernels.Setup
}

// deferSetup attaches a just-claimed kernel to the session and returns its set-up, to ride on the
// first cell.
func (ls *Session) deferSetup(ctx context.Context, k *kernel.Kernel, doc carryover.Session) (*pendingSetup, error) {
	st, err := ls.svc.kern.Defer(ctx, ls.id, k, doc)
	if err != nil {
		return nil, err
	}
	return &pendingSetup{k: k, setup: st}, nil
}

// setupMetadata is the metadata for a cell about to run on k: the pending set-up, if any (nil when
// none, or when code is blank: IPython runs no hook for a blank cell).
func (ls *Session) setupMetadata(k *kernel.Kernel, code string) map[string]any {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.setup == nil || ls.setup.k != k || strings.TrimSpace(code) == "" {
		return nil
	}
	return map[string]any{setupKey: ls.setup.setup}
}

// forgetSetup forgets k's pending set-up: once the kernel has begun a cell that carried it (its busy
// status; from then on the hook runs before the cell's code), or once a set-up request of its own
// has replaced it. Until then it stays pending, so a cell that never reached the kernel leaves it
// for the next one.
func (ls *Session) forgetSetup(k *kernel.Kernel) {
	ls.mu.Lock()
	if ls.setup != nil && ls.setup.k == k {
		ls.setup = nil
	}
	ls.mu.Unlock()
}

// flushSetup sends k's pending set-up with a request of its own: for any use of the kernel other
// than a cell that carries it.
func (ls *Session) flushSetup(ctx context.Context, k *kernel.Kernel) error {
	ls.mu.Lock()
	p := ls.setup
	ls.mu.Unlock()
	if p == nil || p.k != k {
		return nil
	}
	if err := agentops.Setup(ctx, k, p.setup); err != nil {
		return err
	}
	ls.forgetSetup(k)
	return nil
}

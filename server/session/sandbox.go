package session

// sandbox.go connects a claimed kernel's process to its session (workspace, limits, and limit hits
// as events) through the kernel.Provisioner the service was given (server/provisioner.go picks
// kernel/sandbox's bubblewrap boxes or plain local processes). docs/sandbox.md ("Threat model")
// says what the sandbox isolates and what it does not.

import (
	"context"
	"errors"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// claimKernel hands out a kernel for the session: a warm one from the pool, or a new one started for
// it when a pooled kernel cannot be what the session needs: its network setting differs from the
// pool's and the provisioner can tell them apart (a network namespace cannot be swapped under a
// running process), or its context or the env of the run that claims it (runEnv) sets env vars that
// the pool's pre-imported libraries read only when imported (setsImportTimeEnv).
func (f *kernels) claimKernel(ctx context.Context, doc carryover.Session, runEnv map[string]string) (*kernel.Kernel, error) {
	otherNet := (doc.Sandbox.Network != f.opts.Network || doc.Sandbox.NetworkAllow != nil) && kernel.IsolatesNetwork(f.opts.Provisioner)
	importEnv := setsImportTimeEnv(doc.AgentContext.EnvVars) || setsImportTimeEnv(runEnv)
	if !otherNet && !(len(f.cfg.PreImport) > 0 && importEnv) {
		return f.pooled(ctx)
	}
	opts := f.opts
	opts.Fresh = importEnv // not forked from a template either: it imported them too
	if otherNet {
		opts.Network, opts.NetworkAllow = doc.Sandbox.Network, doc.Sandbox.NetworkAllow
	}
	k, err := kernel.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := f.installAgent(ctx, k); err != nil {
		_ = k.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	return k, nil
}

// pooled is a kernel of the pool. One whose start died on the way (a heartbeat lost while it
// imported the agent on a loaded node) held nothing of any session, so another start is tried once
// before the turn is failed: the claim answered 500 for a node that was only slow.
func (f *kernels) pooled(ctx context.Context) (*kernel.Kernel, error) {
	k, err := f.pool.Get(ctx)
	if err != nil && errors.Is(err, kernel.ErrDied) && ctx.Err() == nil {
		f.log.Warn("a kernel died while it started: starting another", "err", err)
		k, err = f.pool.Get(ctx)
	}
	return k, err
}

// setsImportTimeEnv says whether env sets a variable that libraries read only when imported (BLAS
// and OpenMP thread counts, numpy's, matplotlib's, pandas'...: kernel.ImportTimeEnv): such a
// session gets a kernel of its own, so the variable is in place before any library is imported, as
// it would be without the warm pool (a forked kernel's template imported them too, and a launch with
// such env starts cold there as well).
func setsImportTimeEnv(env map[string]string) bool { return kernel.ImportTimeEnv(env) }

// attachKernel gives a claimed kernel the session's limits and workspace, and reports its limit hits
// as the session's events (prepareKernel calls it on every claim and context change; attaching again
// is a no-op).
func (f *kernels) attachKernel(ctx context.Context, id string, k *kernel.Kernel, doc carryover.Session) error {
	p := k.Process()
	if err := p.SetLimits(kernel.Limits{CPUs: doc.Sandbox.CPUs, Memory: doc.Sandbox.Memory}); err != nil {
		return limitErr(err)
	}
	if err := p.AttachWorkspace(f.cfg.workspace(id)); err != nil {
		return err
	}
	if err := f.attachSkills(ctx, p, doc); err != nil {
		return err
	}
	p.OnLimit(func(hit kernel.LimitHit) { f.onLimit(id, k, hit) })
	return nil
}

// limitErr turns a provisioner's rejection of a session's limits into the API's invalid error.
func limitErr(err error) error {
	var le *kernel.LimitError
	if errors.As(err, &le) {
		return carryover.Errorf(carryover.CodeInvalid, "sandbox.%s", le.Message).WithDetails("field", "sandbox."+le.Field)
	}
	return err
}

// sandboxEvent logs a limit hit and records it as a sandbox_limit_exceeded event of the session.
func (s *Service) sandboxEvent(id string, k *kernel.Kernel, hit kernel.LimitHit) {
	s.log.Warn("sandbox limit hit", "session", id, "kernel", k.ID(), "limit", hit.Kind, "limits", hit.Summary, "action", hit.Message)
	s.m.LimitHits.WithLabelValues(hit.Kind).Inc()
	ls, err := s.Session(id)
	if err != nil {
		return // an ephemeral /api/execute session
	}
	payload := map[string]any{"sandbox_id": "sbx_" + k.ID(), "limit": hit.Kind, "message": hit.Message,
		"limits": map[string]any{"memory_bytes": hit.MemoryBytes, "cpus": hit.CPUs, "max_processes": hit.MaxProcesses}}
	ls.emit(context.Background(), carryover.EventSandboxLimitExceeded, payload)
}

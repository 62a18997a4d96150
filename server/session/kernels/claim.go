package kernels

// claim.go connects a claimed kernel's process to its session (workspace, limits, and limit hits
// as events) through the kernel.Provisioner the service was given (server/provisioner.go picks
// kernel/sandbox's bubblewrap boxes or plain local processes). docs/sandbox.md ("Threat model")
// says what the sandbox isolates and what it does not.

import (
	"context"
	"errors"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// Claim hands out a kernel for the session: a warm one from the pool, or a new one started for
// it when a pooled kernel cannot be what the session needs: its network setting differs from the
// pool's and the provisioner can tell them apart (a network namespace cannot be swapped under a
// running process), or its context or the env of the run that claims it (runEnv) sets env vars that
// the pool's pre-imported libraries read only when imported (setsImportTimeEnv).
func (f *Factory) Claim(ctx context.Context, doc carryover.Session, runEnv map[string]string) (*kernel.Kernel, error) {
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
func (f *Factory) pooled(ctx context.Context) (*kernel.Kernel, error) {
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
// as the session's events (Prepare calls it on every claim and context change; attaching again
// is a no-op).
func (f *Factory) attachKernel(ctx context.Context, id string, k *kernel.Kernel, doc carryover.Session) error {
	p := k.Process()
	if err := p.SetLimits(kernel.Limits{CPUs: doc.Sandbox.CPUs, Memory: doc.Sandbox.Memory}); err != nil {
		return LimitErr(err)
	}
	if err := p.AttachWorkspace(f.workspace(id)); err != nil {
		return err
	}
	if err := f.attachSkills(ctx, p, doc); err != nil {
		return err
	}
	p.OnLimit(func(hit kernel.LimitHit) { f.onLimit(id, k, hit) })
	return nil
}

// LimitErr turns a provisioner's rejection of a session's limits into the API's invalid error.
func LimitErr(err error) error {
	var le *kernel.LimitError
	if errors.As(err, &le) {
		return carryover.Errorf(carryover.CodeInvalid, "sandbox.%s", le.Message).WithDetails("field", "sandbox."+le.Field)
	}
	return err
}

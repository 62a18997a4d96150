package session

import (
	"context"

	"github.com/carryover/carryover"
)

// EphemeralRequest is the body of POST /api/execute.
type EphemeralRequest struct {
	Language       string   `json:"language"`
	Code           string   `json:"code"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
	Stdin          *string  `json:"stdin,omitempty"` // what input() reads, as a run's (stdin.go)
}

// RunEphemeral runs code (POST /api/execute) in a throwaway session destroyed at once: nothing is saved or kept.
func (s *Service) RunEphemeral(ctx context.Context, req EphemeralRequest) (*RunResult, error) {
	return s.runEphemeral(ctx, req, func() error { return nil })
}

// runEphemeral is RunEphemeral calling started just before the cell's code starts (a keyed run's
// key is kept from there on: ephemeral_keyed.go).
func (s *Service) runEphemeral(ctx context.Context, req EphemeralRequest, started func() error) (*RunResult, error) {
	if err := carryover.ValidateLanguage(req.Language); err != nil {
		return nil, err
	}
	timeout, err := s.cfg.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	if err := carryover.ValidateCode(req.Code); err != nil {
		return nil, err
	}
	id := randomID("eph_")
	tenant := carryover.TenantFromContext(ctx)
	// Refused at the tenant's stored_bytes or cpu_seconds quota; its own CPU is not counted (no
	// session records it). Its kernel is a live kernel of the tenant like any other (takeKernel).
	if err := s.adm.quota.CheckTurn(ctx, tenant); err != nil {
		return nil, err
	}
	ls := &Session{svc: s, id: id, doc: carryover.Session{ID: id, Tenant: tenant, AgentContext: carryover.AgentContext{WorkingDir: "/workspace"},
		Sandbox: carryover.Sandbox{Network: s.cfg.Network}}} // the pool's kernels' network setting: a pooled kernel
	k, err := s.takeKernel(ctx, kernelClaim{doc: ls.doc})
	if err != nil {
		return nil, err
	}
	defer func() {
		s.stopKernel(context.WithoutCancel(ctx), k)
		_ = s.kern.RemoveWorkspace(id)
	}()
	if err := s.kern.Prepare(ctx, id, k, ls.doc); err != nil {
		return nil, err
	}
	if err := started(); err != nil {
		return nil, err
	}
	res, err := ls.runCode(ctx, k, req.Code, timeout, RunOptions{ID: id, stdin: stdinOf(req.Stdin)}, 1, nil)
	if err != nil {
		if e := carryover.ErrorOf(err); e.Code == carryover.CodeTimeout || e.Code == carryover.CodeKernelDied {
			return res, err
		}
		return nil, err
	}
	return res, nil
}

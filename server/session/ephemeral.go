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
}

// RunEphemeral runs code (POST /api/execute) in a throwaway session destroyed at once: nothing is saved or kept.
func (s *Service) RunEphemeral(ctx context.Context, req EphemeralRequest) (*RunResult, error) {
	if err := carryover.ValidateLanguage(req.Language); err != nil {
		return nil, err
	}
	timeout, err := s.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	if err := carryover.ValidateCode(req.Code); err != nil {
		return nil, err
	}
	id := randomID("eph_")
	tenant := carryover.TenantFromContext(ctx)
	release, err := s.admitEphemeral(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := s.acquireSlot(ctx, tenant); err != nil { // a throwaway kernel is a live kernel too
		return nil, err
	}
	k, err := s.pool.Get(ctx)
	if err != nil {
		s.slots.release(tenant)
		return nil, err
	}
	s.kernelTaken(k, tenant)
	ls := &liveSession{id: id, doc: carryover.Session{ID: id, AgentContext: carryover.AgentContext{WorkingDir: "/workspace"},
		Sandbox: carryover.Sandbox{Network: s.cfg.Network}}} // the pool's kernels' network setting
	defer func() {
		s.stopKernel(context.WithoutCancel(ctx), k)
		_ = s.removeWorkspace(id)
	}()
	if err := s.prepareKernel(ctx, id, k, ls.doc); err != nil {
		return nil, err
	}
	markStarted(ctx) // a keyed run's code starts (ephemeral_keyed.go): its key is kept whatever happens next
	res, err := s.runCode(ctx, ls, k, req.Code, timeout, RunOptions{ID: id}, 1, nil)
	if err != nil {
		if e := carryover.ErrorOf(err); e.Code == carryover.CodeTimeout || e.Code == carryover.CodeKernelDied {
			return res, err
		}
		return nil, err
	}
	return res, nil
}

package session

// context.go: a session's agent context (working dir, env vars, custom state), kept in its
// document across kernels and applied to the live kernel when it changes.

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
)

// PatchContext replaces the given context keys and applies them to the live kernel.
func (s *Service) PatchContext(ctx context.Context, id string, req ContextRequest) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	var wd string
	if req.WorkingDir != nil {
		rel, err := carryover.WorkspacePath(*req.WorkingDir)
		if err != nil {
			return carryover.Session{}, err
		}
		wd = "/workspace"
		if rel != "" {
			wd += "/" + rel
		}
		// Made (or refused: a name too long, a file in the way) before it is saved: a working_dir
		// the kernel cannot enter, once saved, made every later PATCH of the context answer 500.
		if err := ls.mkdirWorkspace(ctx, rel); err != nil {
			return carryover.Session{}, err
		}
	}
	if err := carryover.ValidateEnv(req.EnvVars, "env_vars"); err != nil {
		return carryover.Session{}, err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	doc, err := ls.update(ctx, func(d *carryover.Session) error {
		if req.WorkingDir != nil {
			d.AgentContext.WorkingDir = wd
		}
		if req.EnvVars != nil {
			d.AgentContext.EnvVars = req.EnvVars
		}
		if req.CustomState != nil {
			d.AgentContext.CustomState = req.CustomState
		}
		return nil
	})
	if err != nil {
		return carryover.Session{}, err
	}
	if k := ls.currentKernel(); k != nil {
		// Env vars that were removed from the context leave the kernel too.
		if err := s.kern.Prepare(ctx, id, k, doc); err != nil {
			return doc, fmt.Errorf("applying context to the kernel: %w", err)
		}
		ls.forgetSetup(k) // a set-up pending from the claim holds the old context
	}
	return doc, nil
}

package session

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// ContextRequest is the body of PATCH /api/sessions/{id}/context: given keys replace.
type ContextRequest struct {
	WorkingDir  *string           `json:"working_dir"`
	EnvVars     map[string]string `json:"env_vars"`
	CustomState map[string]any    `json:"custom_state"`
}

// PatchContext replaces the given context keys and applies them to the live kernel.
func (s *Service) PatchContext(ctx context.Context, id string, req ContextRequest) (carryover.Session, error) {
	ls, err := s.get(id)
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
		if err := s.mkdirWorkspace(ctx, ls, rel); err != nil {
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
	doc, err := s.update(ctx, ls, func(d *carryover.Session) error {
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
		if err := s.prepareKernel(ctx, id, k, doc); err != nil {
			return doc, fmt.Errorf("applying context to the kernel: %w", err)
		}
		ls.forgetSetup(k) // a set-up pending from the claim holds the old context
	}
	return doc, nil
}

// Interrupt interrupts the run in flight, if any.
func (s *Service) Interrupt(ctx context.Context, id string) error {
	ls, err := s.get(id)
	if err != nil {
		return err
	}
	if k := ls.currentKernel(); k != nil {
		return k.Interrupt(ctx)
	}
	return nil
}

// Restart gives the session a new kernel with its last checkpoint restored.
func (s *Service) Restart(ctx context.Context, id string) (carryover.Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return carryover.Session{}, err
	}
	if k := ls.currentKernel(); k != nil && ls.lock.Busy() {
		_ = k.Interrupt(ctx)
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	if doc := ls.snapshot(); doc.Closed() {
		return carryover.Session{}, carryover.Errorf(carryover.CodeSessionClosed, "session is %s", doc.State)
	}
	s.releaseKernel(ctx, ls, "restart requested")
	if _, err := s.ensureKernel(ctx, ls); err != nil {
		return carryover.Session{}, err
	}
	return ls.snapshot(), nil
}

// CheckpointNow takes a checkpoint outside a run.
func (s *Service) CheckpointNow(ctx context.Context, id string) (*carryover.CheckpointResult, error) {
	ls, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return nil, err
	}
	defer ls.lock.Unlock()
	k := ls.currentKernel()
	if k == nil {
		return nil, carryover.Errorf(carryover.CodeConflict, "session has no live kernel; its last checkpoint is current").
			WithDetails("last_checkpoint", ls.snapshot().LastCheckpoint)
	}
	res, err := s.checkpoint(ctx, ls, k)
	if err != nil {
		return nil, err
	}
	s.emit(ctx, ls, carryover.EventCheckpointCreated, res)
	return res, nil
}

// Checkpoints lists a session's checkpoints, newest first.
func (s *Service) Checkpoints(ctx context.Context, id string) ([]carryover.CheckpointSummary, error) {
	if _, err := s.get(id); err != nil {
		return nil, err
	}
	cps, err := s.store.ListCheckpoints(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]carryover.CheckpointSummary, 0, len(cps))
	for _, cp := range cps {
		out = append(out, persistence.Summarize(cp))
	}
	return out, nil
}

// RestoreCheckpoint puts the session back to a checkpoint: a fresh kernel, that namespace, those files.
func (s *Service) RestoreCheckpoint(ctx context.Context, id, cid string) (*carryover.RestoreResult, error) {
	ls, err := s.get(id)
	if err != nil {
		return nil, err
	}
	cp, err := s.store.GetCheckpoint(ctx, id, cid)
	if errors.Is(err, carryover.ErrNotFound) {
		return nil, carryover.Errorf(carryover.CodeNotFound, "checkpoint %q not found", cid)
	} else if err != nil {
		return nil, err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return nil, err
	}
	defer ls.lock.Unlock()
	if doc := ls.snapshot(); doc.Closed() || doc.State == carryover.StatePaused {
		return nil, carryover.Errorf(carryover.CodeConflict, "cannot restore a %s session", doc.State)
	}
	if ls.snapshot().State == carryover.StatePending {
		if _, _, err := s.transition(ctx, ls, carryover.StateRunning, nil); err != nil {
			return nil, err
		}
	}
	s.releaseKernel(ctx, ls, "checkpoint restore")
	k, err := s.claimKernel(ctx, ls.snapshot(), nil) // pool, or a new kernel for another network setting
	if err != nil {
		return nil, err
	}
	kernelsLive.Inc()
	baseline := costBaseline(k)
	doc := ls.snapshot()
	doc.ExecutionCount = cp.Turn
	if err := s.prepareKernel(ctx, id, k, doc); err != nil {
		s.stopKernel(ctx, k)
		return nil, err
	}
	res, err := s.ckpt.Restore(ctx, k, id, cp.ID, s.workspace(id), true)
	if err != nil {
		s.stopKernel(ctx, k)
		return nil, err
	}
	ls.mu.Lock()
	ls.attachLocked(k, baseline)
	ls.doc.Sandbox.ID = "sbx_" + k.ID()
	ls.doc.Sandbox.Status = carryover.SandboxLive
	ls.mu.Unlock()
	go s.watchKernel(ls, k)
	// The restored state becomes the newest checkpoint, so a later crash comes back to it.
	cpRes, err := s.checkpoint(ctx, ls, k)
	if err != nil {
		return res, err
	}
	s.emit(ctx, ls, carryover.EventCheckpointRestored, map[string]any{"checkpoint_id": cp.ID, "turn": cp.Turn, "restore": res, "new_checkpoint_id": cpRes.ID})
	return res, nil
}

// completeTimeout bounds a completion request: the kernel sends no reply to some requests (a cursor
// it cannot place), and Tab must never hang.
const completeTimeout = 10 * time.Second

// Complete asks the kernel for completions (the UI's Tab). cursor counts characters (unicode code
// points) of code, as Jupyter's protocol does.
func (s *Service) Complete(ctx context.Context, id, code string, cursor int) (*kernel.CompleteReply, error) {
	ls, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if n := utf8.RuneCountInString(code); cursor < 0 || cursor > n {
		return nil, carryover.Errorf(carryover.CodeInvalid, "cursor_pos must be between 0 and %d (the length of code)", n).WithDetails("field", "cursor_pos")
	}
	k := ls.currentKernel()
	if k == nil {
		return &kernel.CompleteReply{Matches: []string{}, CursorStart: cursor, CursorEnd: cursor}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	sub, off := completeWindowOf(code, cursor)
	rep, err := k.Complete(ctx, sub, cursor-off)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, carryover.Wrap(carryover.CodeTimeout, err, "the kernel did not answer the completion request within %s", completeTimeout)
	}
	if rep != nil {
		rep.CursorStart += off
		rep.CursorEnd += off
	}
	return rep, err
}

// completeWindow bounds the code around the cursor a completion request sends, in code points
// each side: the kernel (jedi) took over 10 s on a 100 KiB identifier, and its shell channel, busy
// with it, held up every later request of the session (found by the API fuzz).
const completeWindow = 4096

// completeWindowOf is the part of code sent for a completion at cursor: at most completeWindow
// code points before the cursor (from a line start when one is in reach) and after it, and the
// offset of its start in code.
func completeWindowOf(code string, cursor int) (string, int) {
	if utf8.RuneCountInString(code) <= 2*completeWindow {
		return code, 0
	}
	runes := []rune(code)
	off := max(0, cursor-completeWindow)
	if off > 0 {
		for i := off; i < cursor; i++ {
			if runes[i] == '\n' {
				off = i + 1
				break
			}
		}
	}
	end := min(len(runes), cursor+completeWindow)
	return string(runes[off:end]), off
}

// RegisterTool adds a tool to the session's registry.
func (s *Service) RegisterTool(ctx context.Context, id string, t carryover.Tool) (carryover.Tool, error) {
	ls, err := s.get(id)
	if err != nil {
		return t, err
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	if t.ToolType == "" {
		t.ToolType = "custom"
	}
	t.SessionID = id
	if err := s.store.PutTool(ctx, t); err != nil {
		return t, err
	}
	s.emit(ctx, ls, carryover.EventToolRegistered, map[string]any{"name": t.Name, "tool_type": t.ToolType})
	// The answer shows the tool as stored (its created_at is the first registration's).
	if ts, err := s.store.ListTools(ctx, id); err == nil {
		for _, st := range ts {
			if st.Name == t.Name {
				return st, nil
			}
		}
	}
	return t, nil
}

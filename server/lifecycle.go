package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/carryover/carryover/kernel/sandbox"
	"github.com/carryover/carryover/persistence"
)

// CreateRequest is the body of POST /api/sessions; every field is optional.
type CreateRequest struct {
	SessionID string         `json:"session_id"`
	Name      string         `json:"name"`
	Language  string         `json:"language"`
	Data      map[string]any `json:"data"`
	Budget    *Budget        `json:"budget"`
	Sandbox   *struct {
		CPUs           string   `json:"cpus"`
		Memory         string   `json:"memory"`
		TimeoutSeconds *float64 `json:"timeout_seconds"`
		Network        *bool    `json:"network"`
	} `json:"sandbox"`
	Rotation *Rotation `json:"rotation"`
	ClientID string    `json:"client_id"`
	Start    bool      `json:"start"`
}

func randomID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Create makes a new session (pending, or running when req.Start).
func (s *Service) Create(ctx context.Context, req CreateRequest) (Session, error) {
	id := req.SessionID
	if id == "" {
		id = randomID("sess_")
	}
	if !idRE.MatchString(id) {
		return Session{}, errorf(CodeInvalid, "session_id must match %s", idRE.String()).withDetails("field", "session_id")
	}
	switch req.Language {
	case "", "python", "python3":
	default:
		return Session{}, errorf(CodeInvalid, "language %q is not available; use \"python\"", req.Language).withDetails("field", "language")
	}
	if req.Budget != nil && (req.Budget.CostCapCents < 0 || req.Budget.IterationLimit < 0 || req.Budget.DurationLimitSeconds < 0) {
		return Session{}, errorf(CodeInvalid, "budget limits must not be negative").withDetails("field", "budget")
	}
	now := time.Now().UTC()
	doc := Session{
		ID: id, Name: req.Name, Language: "python", State: StatePending,
		Sandbox:      Sandbox{Status: SandboxNone, TimeoutSeconds: s.cfg.Sandbox.TimeoutSeconds, Network: s.cfg.Sandbox.Network},
		Data:         req.Data,
		AgentContext: AgentContext{WorkingDir: "/workspace", EnvVars: map[string]string{}, CustomState: map[string]any{}},
		ClientID:     req.ClientID,
		Tenant:       tenantFrom(ctx),
		CreatedAt:    now, UpdatedAt: now, LastActivity: now,
	}
	if doc.Data == nil {
		doc.Data = map[string]any{}
	}
	if req.Budget != nil {
		doc.Budget = *req.Budget
	}
	if sb := req.Sandbox; sb != nil {
		if sb.CPUs != "" {
			if _, err := sandbox.ParseCPUs(sb.CPUs); err != nil {
				return Session{}, errorf(CodeInvalid, "sandbox.cpus: %v", err).withDetails("field", "sandbox.cpus")
			}
		}
		if sb.Memory != "" {
			if _, err := sandbox.ParseMemory(sb.Memory); err != nil {
				return Session{}, errorf(CodeInvalid, "sandbox.memory: %v", err).withDetails("field", "sandbox.memory")
			}
		}
		doc.Sandbox.CPUs, doc.Sandbox.Memory = sb.CPUs, sb.Memory
		if sb.TimeoutSeconds != nil {
			if *sb.TimeoutSeconds < 0 {
				return Session{}, errorf(CodeInvalid, "sandbox.timeout_seconds must not be negative").withDetails("field", "sandbox.timeout_seconds")
			}
			doc.Sandbox.TimeoutSeconds = *sb.TimeoutSeconds
		}
		if sb.Network != nil {
			doc.Sandbox.Network = *sb.Network
		}
	}
	if req.Rotation != nil {
		doc.Rotation = *req.Rotation
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return Session{}, errorf(CodeConflict, "server is shutting down")
	}
	if _, ok := s.sessions[id]; ok {
		s.mu.Unlock()
		return Session{}, errorf(CodeConflict, "session %q already exists", id).withDetails("session_id", id)
	}
	ls := &liveSession{id: id, doc: doc}
	s.sessions[id] = ls
	s.mu.Unlock()

	b, _ := json.Marshal(doc)
	err := s.store.CreateSession(ctx, persistence.SessionRow{ID: id, ClientID: doc.ClientID, State: doc.State, Doc: b, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		s.mu.Lock()
		delete(s.sessions, id)
		s.mu.Unlock()
		if errors.Is(err, persistence.ErrExists) {
			return Session{}, errorf(CodeConflict, "session %q already exists", id)
		}
		return Session{}, err
	}
	if err := os.MkdirAll(s.workspace(id), 0o755); err != nil {
		return Session{}, err
	}
	if req.Start {
		return s.Start(ctx, id)
	}
	return ls.snapshot(), nil
}

// Patch merges data into the session's data.
func (s *Service) Patch(ctx context.Context, id string, data map[string]any) (Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return Session{}, err
	}
	return s.update(ctx, ls, func(d *Session) error {
		if d.Data == nil {
			d.Data = map[string]any{}
		}
		for k, v := range data {
			d.Data[k] = v
		}
		return nil
	})
}

// Delete stops the kernel and removes every trace of the session.
func (s *Service) Delete(ctx context.Context, id string) error {
	ls, err := s.get(id)
	if err != nil {
		return err
	}
	// Gone for new requests at once; a run in flight is interrupted and waited for, and runs queued
	// behind it find the session deleted (admit), so no kernel is started for it afterwards.
	s.mu.Lock()
	delete(s.sessions, id)
	s.mu.Unlock()
	ls.mu.Lock()
	ls.deleted = true
	k := ls.kern
	ls.mu.Unlock()
	if k != nil && ls.lock.Busy() {
		_ = k.Interrupt(ctx)
	}
	if err := ls.lock.Lock(context.WithoutCancel(ctx)); err == nil {
		defer ls.lock.Unlock()
	}
	ls.mu.Lock()
	k = ls.kern
	ls.kern = nil
	ls.mu.Unlock()
	if k != nil {
		s.stopKernel(ctx, k)
	}
	ls.hub.broadcast(map[string]any{"type": "error", "error": map[string]any{"code": CodeNotFound, "message": "session deleted"}})
	if err := s.store.DeleteSession(ctx, id); err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return err
	}
	go func() { _, _, _ = s.store.GC(context.Background()) }()
	return os.RemoveAll(s.workspace(id))
}

// transition moves the session to a new state, answering conflict for an illegal move.
func (s *Service) transition(ctx context.Context, ls *liveSession, to string, fn func(*Session)) (Session, string, error) {
	var from string
	doc, err := s.update(ctx, ls, func(d *Session) error {
		from = d.State
		if !canMove(d.State, to) {
			return errorf(CodeConflict, "cannot move session from %s to %s", d.State, to).
				withDetails("state", d.State, "requested", to)
		}
		d.setState(to, time.Now().UTC())
		d.LastActivity = time.Now().UTC()
		if fn != nil {
			fn(d)
		}
		return nil
	})
	return doc, from, err
}

// Start moves a pending session to running and gives it a kernel.
func (s *Service) Start(ctx context.Context, id string) (Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return Session{}, err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return Session{}, err
	}
	defer ls.lock.Unlock()
	if _, _, err := s.transition(ctx, ls, StateRunning, nil); err != nil {
		return Session{}, err
	}
	s.emit(ctx, ls, "session_started", nil)
	if _, err := s.ensureKernel(ctx, ls); err != nil {
		return ls.snapshot(), err
	}
	return ls.snapshot(), nil
}

// Pause keeps the kernel but rejects run/exec until Resume.
func (s *Service) Pause(ctx context.Context, id string) (Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return Session{}, err
	}
	doc, _, err := s.transition(ctx, ls, StatePaused, nil)
	if err == nil {
		ls.mu.Lock()
		ls.pausedAt = time.Now()
		ls.mu.Unlock()
		s.emit(ctx, ls, "session_paused", nil)
	}
	return doc, err
}

// Resume undoes Pause.
func (s *Service) Resume(ctx context.Context, id string) (Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return Session{}, err
	}
	if st := ls.snapshot().State; st != StatePaused {
		return Session{}, errorf(CodeConflict, "session is %s, not paused", st).withDetails("state", st)
	}
	doc, _, err := s.transition(ctx, ls, StateRunning, nil)
	if err == nil {
		ls.mu.Lock()
		if !ls.pausedAt.IsZero() {
			ls.pausedFor += time.Since(ls.pausedAt)
			ls.pausedAt = time.Time{}
		}
		ls.mu.Unlock()
		s.emit(ctx, ls, "session_resumed", nil)
	}
	return doc, err
}

// Stop completes the session: a final checkpoint is taken, then the kernel stops.
func (s *Service) Stop(ctx context.Context, id, reason string) (Session, error) {
	return s.finish(ctx, id, StateCompleted, "session_completed", reason, true)
}

// Cancel force-ends the session without a final checkpoint.
func (s *Service) Cancel(ctx context.Context, id, reason string) (Session, error) {
	return s.finish(ctx, id, StateCancelled, "session_cancelled", reason, false)
}

func (s *Service) finish(ctx context.Context, id, to, event, reason string, checkpoint bool) (Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return Session{}, err
	}
	// A closed session answers at once; any other state is checked again under the run lock, so a
	// stop or cancel that arrives during a rotation waits for it instead of failing.
	if doc := ls.snapshot(); doc.closed() {
		return Session{}, errorf(CodeConflict, "cannot move session from %s to %s", doc.State, to).withDetails("state", doc.State)
	}
	if to == StateCancelled {
		// Cancel does not wait for a run in flight: interrupt it first.
		ls.mu.Lock()
		k := ls.kern
		ls.mu.Unlock()
		if k != nil && ls.lock.Busy() {
			_ = k.Interrupt(ctx)
		}
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return Session{}, err
	}
	defer ls.lock.Unlock()
	if st := ls.snapshot().State; !canMove(st, to) {
		return Session{}, errorf(CodeConflict, "cannot move session from %s to %s", st, to).withDetails("state", st)
	}
	payload := map[string]any{"reason": reason}
	if k := ls.currentKernel(); checkpoint && k != nil {
		res, err := s.checkpoint(ctx, ls, k)
		if err != nil {
			// Stopping now would lose what changed since the last turn's checkpoint: refuse, and say how
			// to force it.
			return Session{}, &Error{Code: CodeInternal, Err: err, Message: fmt.Sprintf(
				"the final checkpoint failed, so the session was not stopped (cancel ends it without one): %v", err)}
		}
		payload["checkpoint_id"] = res.ID
	}
	doc, _, err := s.transition(ctx, ls, to, func(d *Session) {
		d.StopReason = reason
		d.Sandbox.Status = SandboxNone
	})
	if err != nil {
		return Session{}, err
	}
	s.releaseKernel(ctx, ls, "session "+to)
	s.emit(ctx, ls, event, payload)
	return doc, nil
}

// Heartbeat records client activity.
func (s *Service) Heartbeat(ctx context.Context, id string) (Session, error) {
	ls, err := s.get(id)
	if err != nil {
		return Session{}, err
	}
	doc, err := s.update(ctx, ls, func(d *Session) error {
		d.LastActivity = time.Now().UTC()
		return nil
	})
	if err == nil {
		s.emit(ctx, ls, "heartbeat", nil)
	}
	return doc, err
}

// Reattach finds the session of a client id (the most recently updated one not closed, else any).
func (s *Service) Reattach(ctx context.Context, clientID string) (Session, error) {
	if clientID == "" {
		return Session{}, errorf(CodeInvalid, "client_id is required").withDetails("field", "client_id")
	}
	var best *Session
	tenant := tenantFrom(ctx)
	for _, d := range s.List() {
		if d.ClientID != clientID || d.tenant() != tenant {
			continue
		}
		if best == nil || (best.closed() && !d.closed()) || (best.closed() == d.closed() && d.UpdatedAt.After(best.UpdatedAt)) {
			d := d
			best = &d
		}
	}
	if best == nil {
		return Session{}, errorf(CodeNotFound, "no session for client_id %q", clientID)
	}
	return s.Heartbeat(ctx, best.ID)
}

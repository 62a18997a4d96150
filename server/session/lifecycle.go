package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/sessiondoc"
	"github.com/carryover/carryover/server/session/stream"
)

func randomID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Create makes a new session (pending, or running when req.Start).
func (s *Service) Create(ctx context.Context, req CreateRequest) (carryover.Session, error) {
	id := req.SessionID
	if id == "" {
		id = randomID("sess_")
	}
	doc, err := sessiondoc.FromCreate(req, id, carryover.TenantFromContext(ctx), s.newDocs())
	if err != nil {
		return carryover.Session{}, err
	}
	release, err := s.adm.quota.AdmitCreate(ctx, doc.TenantName())
	if err != nil {
		return carryover.Session{}, err
	}
	release = sync.OnceFunc(release)
	defer release() // a no-op once called below, when the session is in the store
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return carryover.Session{}, carryover.Errorf(carryover.CodeConflict, "server is shutting down")
	}
	if _, ok := s.sessions[id]; ok {
		s.mu.Unlock()
		return carryover.Session{}, carryover.Errorf(carryover.CodeConflict, "session %q already exists", id).WithDetails("session_id", id)
	}
	ls := &Session{svc: s, id: id, doc: doc}
	s.sessions[id] = ls
	s.mu.Unlock()

	b, _ := json.Marshal(doc)
	err = s.store.CreateSession(ctx, carryover.SessionRecord{ID: id, ClientID: doc.ClientID, State: doc.State, Doc: b,
		CreatedAt: doc.CreatedAt, UpdatedAt: doc.UpdatedAt})
	if err != nil {
		s.mu.Lock()
		delete(s.sessions, id)
		s.mu.Unlock()
		if errors.Is(err, carryover.ErrConflict) {
			return carryover.Session{}, carryover.Errorf(carryover.CodeConflict, "session %q already exists", id)
		}
		return carryover.Session{}, err
	}
	release()
	if err := os.MkdirAll(s.cfg.workspace(id), 0o755); err != nil {
		return carryover.Session{}, err
	}
	if !req.Start {
		return ls.docCopy(), nil
	}
	// A refused start takes the session out again: the caller got an error, not a session (nor an id).
	started, err := s.Start(ctx, id)
	if err != nil {
		if derr := s.Delete(context.WithoutCancel(ctx), id); derr != nil {
			s.log.Warn("a session whose start failed at its create was not deleted", "session", id, "err", derr)
		}
		return carryover.Session{}, err
	}
	return started, nil
}

// Patch merges data into the session's data.
func (s *Service) Patch(ctx context.Context, id string, data map[string]any) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	return ls.update(ctx, func(d *carryover.Session) error {
		d.Data = mergedData(d.Data, data)
		return nil
	})
}

// mergedData is a new map holding data with add's keys set over it. Never merge in place: snapshots
// handed out earlier share the old map and may be read (encoded for an answer) right now, and a
// failed save puts the old document back.
func mergedData(data, add map[string]any) map[string]any {
	next := make(map[string]any, len(data)+len(add))
	for k, v := range data {
		next[k] = v
	}
	for k, v := range add {
		next[k] = v
	}
	return next
}

// Delete stops the kernel and removes every trace of the session.
func (s *Service) Delete(ctx context.Context, id string) error {
	ls, err := s.Session(id)
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
	ls.mu.Unlock()
	if ls.lock.Busy() {
		_ = ls.Interrupt(ctx)
	}
	if err := ls.lock.Lock(context.WithoutCancel(ctx)); err == nil {
		defer ls.lock.Unlock()
	}
	ls.mu.Lock()
	k := ls.kern
	ls.kern = nil
	ls.mu.Unlock()
	if k != nil {
		s.stopKernel(ctx, k)
	}
	ls.hub.Broadcast(stream.ErrorFrame{Type: "error", Error: carryover.Errorf(carryover.CodeNotFound, "session deleted")})
	if err := s.store.DeleteSession(ctx, id); err != nil && !errors.Is(err, carryover.ErrNotFound) {
		return err
	}
	go func() { _, _, _ = s.store.GC(context.Background()) }()
	return s.kern.RemoveWorkspace(id)
}

// deletedDuring is the answer of a turn whose session was deleted while it ran (Delete interrupts
// it): not_found with the output so far (res: the run's or the command's answer), rather than the
// interrupted cell's error and a checkpoint that is deleted with the session. Nil when the session
// is not deleted (or moved to another node: lostDuring).
func deletedDuring(ls *Session, res any) error {
	ls.mu.Lock()
	deleted, evicted := ls.deleted, ls.evicted
	ls.mu.Unlock()
	if !deleted || evicted {
		return nil
	}
	return &carryover.Error{Code: carryover.CodeNotFound, Result: res, Message: fmt.Sprintf(
		"session %q was deleted during this turn: it was interrupted and nothing of it saved; its output so far is in result", ls.id)}
}

// transition moves the session to a new state, answering conflict for an illegal move.
func (ls *Session) transition(ctx context.Context, to string, fn func(*carryover.Session)) (carryover.Session, string, error) {
	var from string
	doc, err := ls.update(ctx, func(d *carryover.Session) error {
		from = d.State
		if !carryover.CanMove(d.State, to) {
			return carryover.MoveError(d.State, to)
		}
		d.SetState(to, time.Now().UTC())
		d.LastActivity = time.Now().UTC()
		if fn != nil {
			fn(d)
		}
		return nil
	})
	return doc, from, err
}

// Start moves a pending session to running and gives it a kernel.
func (s *Service) Start(ctx context.Context, id string) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	if _, _, err := ls.transition(ctx, carryover.StateRunning, nil); err != nil {
		return carryover.Session{}, err
	}
	ls.emit(ctx, carryover.EventSessionStarted, nil)
	if _, err := ls.ensureKernel(ctx); err != nil {
		return ls.docCopy(), err
	}
	return ls.docCopy(), nil
}

// Pause keeps the kernel but rejects run/exec until Resume.
func (s *Service) Pause(ctx context.Context, id string) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	doc, _, err := ls.transition(ctx, carryover.StatePaused, nil)
	if err == nil {
		ls.mu.Lock()
		ls.pausedAt = time.Now()
		ls.mu.Unlock()
		ls.emit(ctx, carryover.EventSessionPaused, nil)
	}
	return doc, err
}

// Resume undoes Pause.
func (s *Service) Resume(ctx context.Context, id string) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	if st := ls.docCopy().State; st != carryover.StatePaused {
		return carryover.Session{}, carryover.Errorf(carryover.CodeConflict, "session is %s, not paused", st).WithDetails("state", st)
	}
	doc, _, err := ls.transition(ctx, carryover.StateRunning, nil)
	if err == nil {
		ls.mu.Lock()
		if !ls.pausedAt.IsZero() {
			ls.pausedFor += time.Since(ls.pausedAt)
			ls.pausedAt = time.Time{}
		}
		ls.mu.Unlock()
		ls.emit(ctx, carryover.EventSessionResumed, nil)
	}
	return doc, err
}

// Stop completes the session: a final checkpoint is taken, then the kernel stops.
func (s *Service) Stop(ctx context.Context, id, reason string) (carryover.Session, error) {
	return s.finish(ctx, id, carryover.StateCompleted, carryover.EventSessionCompleted, reason, true)
}

// Cancel force-ends the session without a final checkpoint.
func (s *Service) Cancel(ctx context.Context, id, reason string) (carryover.Session, error) {
	return s.finish(ctx, id, carryover.StateCancelled, carryover.EventSessionCancelled, reason, false)
}

func (s *Service) finish(ctx context.Context, id, to, event, reason string, checkpoint bool) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	// A closed session answers at once; any other state is checked again under the run lock, so a
	// stop or cancel that arrives during a rotation waits for it instead of failing.
	if doc := ls.docCopy(); doc.Closed() {
		return carryover.Session{}, carryover.Errorf(carryover.CodeConflict, "cannot move session from %s to %s", doc.State, to).WithDetails("state", doc.State)
	}
	if to == carryover.StateCancelled {
		// Cancel does not wait for a run in flight: interrupt it first.
		if ls.lock.Busy() {
			_ = ls.Interrupt(ctx)
		}
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	if st := ls.docCopy().State; !carryover.CanMove(st, to) {
		return carryover.Session{}, carryover.Errorf(carryover.CodeConflict, "cannot move session from %s to %s", st, to).WithDetails("state", st)
	}
	payload := map[string]any{"reason": reason}
	if k := ls.currentKernel(); checkpoint && k != nil {
		res, err := ls.checkpoint(ctx, k)
		if err != nil {
			// Stopping now would lose what changed since the last turn's checkpoint: refuse, and say how
			// to force it.
			return carryover.Session{}, &carryover.Error{Code: carryover.CodeInternal, Err: err, Message: fmt.Sprintf(
				"the final checkpoint failed, so the session was not stopped (cancel ends it without one): %v", err)}
		}
		payload["checkpoint_id"] = res.ID
	}
	doc, _, err := ls.transition(ctx, to, func(d *carryover.Session) {
		d.StopReason = reason
		d.Sandbox.Status = carryover.SandboxNone
	})
	if err != nil {
		return carryover.Session{}, err
	}
	ls.releaseKernel(ctx, "session "+to)
	ls.emit(ctx, event, payload)
	return doc, nil
}

// Heartbeat records client activity.
func (s *Service) Heartbeat(ctx context.Context, id string) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	doc, err := ls.update(ctx, func(d *carryover.Session) error {
		d.LastActivity = time.Now().UTC()
		return nil
	})
	if err == nil {
		ls.emit(ctx, carryover.EventHeartbeat, nil)
	}
	return doc, err
}

// Reattach finds the session of a client id (the most recently updated one not closed, else any).
func (s *Service) Reattach(ctx context.Context, clientID string) (carryover.Session, error) {
	id, err := s.ReattachTarget(ctx, clientID)
	if err != nil {
		return carryover.Session{}, err
	}
	return s.Heartbeat(ctx, id)
}

// ReattachTarget is the session Reattach picks for clientID among the tenant's (in a cluster: among
// every session of the shared store, so the router can send the call to its owner): an open one
// before a closed one, then the most recently updated.
func (s *Service) ReattachTarget(ctx context.Context, clientID string) (string, error) {
	if clientID == "" {
		return "", carryover.Errorf(carryover.CodeInvalid, "client_id is required").WithDetails("field", "client_id")
	}
	all, err := s.ListAll(ctx)
	if err != nil {
		return "", err
	}
	var best *carryover.Session
	tenant := carryover.TenantFromContext(ctx)
	for _, d := range all {
		if d.ClientID != clientID || d.TenantName() != tenant {
			continue
		}
		if best == nil || (best.Closed() && !d.Closed()) || (best.Closed() == d.Closed() && d.UpdatedAt.After(best.UpdatedAt)) {
			d := d
			best = &d
		}
	}
	if best == nil {
		return "", carryover.Errorf(carryover.CodeNotFound, "no session for client_id %q", clientID)
	}
	return best.ID, nil
}

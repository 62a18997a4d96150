package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/sessiondoc"
)

// Fork makes a new session whose namespace and files are those of a checkpoint of session id (its
// latest by default; a source with a live kernel is checkpointed first, so the fork has its current
// state). The new session belongs to the same tenant and copies the source's name, data, budget
// limits, sandbox settings, rotation settings and agent context (not the client id: reattaching must
// keep finding the source); its budget_consumed,
// execution history and events start empty, its execution counter continues from the checkpoint's
// turn. It is pending with no kernel: like a session after a server restart, its first run claims a
// kernel and restores the checkpoint, and its first use of any kind (run, exec, files) brings the
// checkpoint's files into its workspace.
//
// No chunk is written: the fork's checkpoint is a new record with the source checkpoint's manifest
// and roots, so both sessions share the chunks, and GC keeps them while any checkpoint reaches them.
// Afterwards the two sessions are independent. Fork makes one child whatever req.Count says;
// ForkMany makes several at once.
func (s *Service) Fork(ctx context.Context, id string, req ForkRequest) (carryover.Session, error) {
	one := 1
	req.Count = &one
	docs, err := s.ForkMany(ctx, id, req)
	if err != nil {
		return carryover.Session{}, err
	}
	return docs[0], nil
}

// forkCheckpointID is the checkpoint to fork: the one asked for (which must be the source's), or
// the source's current state (forkPoint).
func (src *Session) forkCheckpointID(ctx context.Context, cid string) (string, error) {
	s := src.svc
	if cid == "" {
		return src.forkPoint(ctx)
	}
	if _, err := s.store.GetCheckpoint(ctx, src.id, cid); errors.Is(err, carryover.ErrNotFound) {
		return "", carryover.Errorf(carryover.CodeNotFound, "checkpoint %q of session %q not found", cid, src.id).WithDetails("checkpoint_id", cid)
	} else if err != nil {
		return "", err
	}
	return cid, nil
}

// reserveFork registers the fork's session, unusable until its checkpoint is committed (admit and
// ensureKernel refuse a deleted session), and stores its document. The caller has admitted it
// against the tenant's sessions quota (ForkMany, all children at once).
func (s *Service) reserveFork(ctx context.Context, doc carryover.Session) (*Session, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, carryover.Errorf(carryover.CodeConflict, "server is shutting down")
	}
	if _, ok := s.sessions[doc.ID]; ok {
		s.mu.Unlock()
		return nil, carryover.Errorf(carryover.CodeConflict, "session %q already exists", doc.ID).WithDetails("session_id", doc.ID)
	}
	ls := &Session{svc: s, id: doc.ID, doc: doc, deleted: true}
	s.sessions[doc.ID] = ls
	s.mu.Unlock()
	b, _ := json.Marshal(doc)
	err := s.store.CreateSession(ctx, carryover.SessionRecord{ID: doc.ID, ClientID: doc.ClientID, State: doc.State, Doc: b,
		CreatedAt: doc.CreatedAt, UpdatedAt: doc.UpdatedAt})
	if err != nil {
		s.mu.Lock()
		delete(s.sessions, doc.ID)
		s.mu.Unlock()
		if errors.Is(err, carryover.ErrConflict) {
			return nil, carryover.Errorf(carryover.CodeConflict, "session %q already exists", doc.ID).WithDetails("session_id", doc.ID)
		}
		return nil, err
	}
	return ls, nil
}

// commitFork gives the fork its checkpoint (the source's, sharing every chunk) and makes it usable.
func (ls *Session) commitFork(ctx context.Context, srcID, cid string) error {
	s := ls.svc
	// The workspace must not exist, so the checkpoint's files come back into it on first use (a dir
	// left by an earlier session of this id would pass for the fork's own).
	_ = s.kern.RemoveWorkspace(ls.id)
	cwd := sessiondoc.Relocate(s.cfg.workspace(srcID), s.cfg.workspace(ls.id)) // the fork's kernel starts in its own
	cp, err := s.ckpt.CopyCheckpoint(ctx, srcID, cid, ls.id, cwd)
	if errors.Is(err, carryover.ErrNotFound) {
		return carryover.Errorf(carryover.CodeNotFound, "checkpoint %q of session %q not found", cid, srcID).WithDetails("checkpoint_id", cid)
	} else if err != nil {
		return fmt.Errorf("fork: %w", err)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.deleted = false
	ls.doc.ExecutionCount = cp.Turn
	ls.doc.LastCheckpoint = &carryover.CheckpointRef{ID: cp.ID, Turn: cp.Turn, CreatedAt: cp.CreatedAt}
	if err := ls.saveLocked(ctx); err != nil {
		ls.deleted = true
		return fmt.Errorf("fork: saving session: %w", err)
	}
	return nil
}

// forkPoint is the checkpoint a fork without checkpoint_id starts from: a new one when the source
// holds a live kernel (under its run lock, so after a run in flight), else its latest. A source that
// never checkpointed cannot be forked (conflict).
func (src *Session) forkPoint(ctx context.Context) (string, error) {
	s := src.svc
	if src.currentKernel() != nil {
		if err := src.lock.Lock(ctx); err != nil {
			return "", err
		}
		defer src.lock.Unlock()
		if k := src.currentKernel(); k != nil {
			res, err := src.checkpoint(ctx, k)
			if err != nil {
				return "", fmt.Errorf("fork: checkpointing the source: %w", err)
			}
			src.emit(ctx, carryover.EventCheckpointCreated, res)
			return res.ID, nil
		}
	}
	cp, err := s.store.LatestCheckpoint(ctx, src.id)
	if errors.Is(err, carryover.ErrNotFound) {
		return "", carryover.Errorf(carryover.CodeConflict, "session %q has no checkpoint to fork yet; run something first", src.id)
	}
	return cp.ID, err
}

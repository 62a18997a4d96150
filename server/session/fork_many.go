package session

import (
	"context"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/sessiondoc"
)

// ForkMany makes req.Count forks (1 when absent, at most MaxForkCount) of session id, each as Fork
// makes one, all from the same checkpoint (req.CheckpointID, or the source's state now: a source
// with a live kernel is checkpointed once for all of them). With req.SessionID and a count above
// one, the children are named SessionID-1 .. SessionID-N; without it, each gets a random id.
//
// It is all or nothing: a bad count or id, a taken id, a checkpoint not of the source, or a
// tenant whose sessions quota cannot hold every child is refused before anything is created, and
// a failure while storing the children deletes the ones already made. The children hold no
// kernel (pending, like any fork), so the node's capacity is not taken here: each child's first
// run claims a kernel as every session does (takeKernel), queued or refused with capacity there.
func (s *Service) ForkMany(ctx context.Context, id string, req ForkRequest) ([]carryover.Session, error) {
	n, err := sessiondoc.ForkCount(req.Count)
	if err != nil {
		return nil, err
	}
	src, err := s.Session(id)
	if err != nil {
		return nil, err
	}
	ids, err := s.forkIDs(req.SessionID, n)
	if err != nil {
		return nil, err
	}
	from := src.docCopy()
	tenant := from.TenantName()
	// Refused over quota before the source is checkpointed; admitted again (held) once the
	// checkpoint is known, as a create holds it while its session is stored.
	release, err := s.adm.quota.AdmitCreateN(ctx, tenant, n)
	if err != nil {
		return nil, err
	}
	release()
	cid, err := src.forkCheckpointID(ctx, req.CheckpointID)
	if err != nil {
		return nil, err
	}
	release, err = s.adm.quota.AdmitCreateN(ctx, tenant, n)
	if err != nil {
		return nil, err
	}
	made, err := s.makeForks(ctx, src, ids, cid)
	release()
	if err != nil {
		return nil, err
	}
	docs := make([]carryover.Session, len(made))
	for i, ls := range made {
		docs[i] = ls.docCopy()
		src.emit(ctx, carryover.EventSessionForked, map[string]any{"session_id": ls.id, "checkpoint_id": cid,
			"role": "source"})
		ls.emit(ctx, carryover.EventSessionForked, map[string]any{"session_id": id, "checkpoint_id": cid,
			"role": "fork", "new_checkpoint_id": docs[i].LastCheckpoint.ID})
	}
	return docs, nil
}

// forkIDs names n children: id itself for one (random when empty), id-1 .. id-n for more (each
// random when id is empty). Each must be a valid id no session holds.
func (s *Service) forkIDs(id string, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		switch {
		case id == "":
			ids[i] = randomID("sess_")
		case n == 1:
			ids[i] = id
		default:
			ids[i] = fmt.Sprintf("%s-%d", id, i+1)
		}
		if err := carryover.ValidateSessionID(ids[i]); err != nil {
			return nil, err
		}
		if _, err := s.Session(ids[i]); err == nil {
			return nil, carryover.Errorf(carryover.CodeConflict, "session %q already exists", ids[i]).WithDetails("session_id", ids[i])
		}
	}
	return ids, nil
}

// makeForks stores a child of src at checkpoint cid under each id, in order; on any failure it
// deletes the children it made and answers the error.
func (s *Service) makeForks(ctx context.Context, src *Session, ids []string, cid string) ([]*Session, error) {
	from, now := src.docCopy(), time.Now().UTC()
	made := make([]*Session, 0, len(ids))
	for _, newID := range ids {
		ls, err := s.reserveFork(ctx, sessiondoc.Fork(from, newID, now))
		if err == nil {
			made = append(made, ls)
			err = ls.commitFork(ctx, src.id, cid)
		}
		if err != nil {
			s.unmakeForks(ctx, made)
			return nil, err
		}
	}
	return made, nil
}

// unmakeForks deletes children made by a fan-out that failed: none was usable yet (their
// checkpoints committed, but no kernel nor workspace), so they go as if never made.
func (s *Service) unmakeForks(ctx context.Context, made []*Session) {
	ctx = context.WithoutCancel(ctx)
	for _, ls := range made {
		ls.mu.Lock()
		ls.deleted = true
		ls.mu.Unlock()
		s.mu.Lock()
		delete(s.sessions, ls.id)
		s.mu.Unlock()
		_ = s.store.DeleteSession(ctx, ls.id)
		_ = s.kern.RemoveWorkspace(ls.id)
	}
}

// sharedBuffers is the node's shared copies of restored buffers when persistence.shared_buffers is
// on (nil: every kernel restores its own).
func sharedBuffers(on bool) *persistence.SharedBuffers {
	if !on {
		return nil
	}
	return persistence.NewSharedBuffers()
}

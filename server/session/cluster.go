package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/stream"
)

// Hooks for a node of a cluster (server/cluster): which sessions this node serves changes while it
// runs. Adopt takes a session in from the shared store when the node claims it; Evict drops one at
// once when the node lost it. A single node never calls them.

// Evict drops session id from this node at once and writes nothing: another node owns it now (or
// may: this node's lease lapsed), so a checkpoint or a state change from here could only be refused
// by the store's fence. The kernel is killed without grace, subscribers get a not_owner error frame
// (websocket clients reconnect, through any node, with after_sequence), and a run in flight ends
// with the kernel. It reports whether the session was here.
func (s *Service) Evict(id string) bool {
	s.mu.Lock()
	ls, ok := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if !ok {
		return false
	}
	s.moved.Add(id)
	ls.mu.Lock()
	ls.deleted = true // nothing may start a kernel for it here any more
	ls.evicted = true
	k := ls.kern
	ls.kern = nil
	ls.mu.Unlock()
	if k != nil {
		// SIGKILL to everything the kernel runs, now: no user code may run on here once another node
		// may run it there. Reaping and cleanup follow in the background.
		k.Process().Signal(syscall.SIGKILL)
		go func() {
			now, cancel := context.WithCancel(context.Background())
			cancel() // a done context: no shutdown_request, no grace
			s.stopKernel(now, k)
		}()
	}
	ls.hub.Broadcast(stream.ErrorFrame{Type: "error", Error: carryover.Errorf(carryover.CodeNotOwner,
		"session %q moved to another node; reconnect", id)})
	return true
}

// Adopt loads session id from the store (replacing any copy this node had: it may be stale) so this
// node serves it; its kernel starts, from the last checkpoint, on the next call that needs one, the
// same path as a restart.
func (s *Service) Adopt(ctx context.Context, id string) error {
	r, err := s.store.GetSession(ctx, id)
	if err != nil {
		return err
	}
	var doc carryover.Session
	if err := json.Unmarshal(r.Doc, &doc); err != nil {
		return fmt.Errorf("session %q: document unreadable: %w", id, err)
	}
	doc = doc.Recovered()
	doc.OwnerNode = s.cfg.ownerNode()
	s.Evict(id)
	s.mu.Lock()
	s.sessions[id] = &Session{svc: s, id: id, doc: doc}
	s.mu.Unlock()
	s.moved.Forget(id)
	return nil
}

// Has reports whether this node has session id in memory.
func (s *Service) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.sessions[id]
	return ok
}

// IDs lists the sessions this node has in memory.
func (s *Service) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		out = append(out, id)
	}
	return out
}

// lostOwnership turns a checkpoint refused by the store's fence into the run's error: the turn ran
// on a kernel this node no longer owns and was not saved, while another node serves the session, so
// the caller must not get a 200 for it. nil for any other checkpoint failure (those answer 200 with
// checkpoint_error, as on one node).
func lostOwnership(id string, err error, res *RunResult) error {
	if !errors.Is(err, carryover.ErrNotOwner) {
		return nil
	}
	return &carryover.Error{Code: carryover.CodeNotOwner, Result: res,
		Message: fmt.Sprintf("session %q moved to another node during this run; the run's effects were not saved", id)}
}

// lostDuring is the run's error once this node lost its session while the run went on (evicted:
// its lease lapsed, or another node claimed it; or its checkpoint fenced); runErr when it still
// serves the session. A turn whose checkpoint committed before the loss happened (the session's next
// owner restores that checkpoint) and is answered as it ran, its record's failure in record_error
// (recordError); told not_owner, its client would retry into run_interrupted and count it twice.
func lostDuring(ls *Session, res *RunResult, runErr error) error {
	ls.mu.Lock()
	evicted := ls.evicted
	ls.mu.Unlock()
	switch {
	case runErr != nil && evicted && carryover.ErrorOf(runErr).Code == carryover.CodeKernelDied:
		return &carryover.Error{Code: carryover.CodeKernelDied, Result: res, Err: runErr, Message: fmt.Sprintf(
			"session %q moved to another node during this run, and this node stopped its kernel: the run's effects were not saved; the session continues from its last checkpoint", ls.id)}
	case runErr != nil:
		return runErr
	case res.lostOwner != nil:
		return res.lostOwner
	case evicted && res.Checkpoint == nil:
		return &carryover.Error{Code: carryover.CodeNotOwner, Result: res,
			Message: fmt.Sprintf("session %q moved to another node during this run; the run's effects were not saved", ls.id)}
	}
	return nil
}

// recordError is record_error for a turn whose record was not written (err): when its session moved
// to another node after the turn's checkpoint committed, it says the turn is saved all the same.
func recordError(ls *Session, res *RunResult, err error) string {
	ls.mu.Lock()
	evicted := ls.evicted
	ls.mu.Unlock()
	if evicted && res.Checkpoint != nil {
		return fmt.Sprintf("the turn ran and its checkpoint %s committed, then session %q moved to another node, which continues from that checkpoint; "+
			"this node could not record the turn: %v", res.Checkpoint.ID, ls.id, err)
	}
	return err.Error()
}

// ownerNode is the owner_node of the sessions this node serves (nil on a single node: the field is
// then left out of the session JSON).
func (c Config) ownerNode() *string {
	if id := c.NodeID; id != "" {
		return &id
	}
	return nil
}

package session

import (
	"context"

	"github.com/carryover/carryover"
)

// A session streams its runs' frames to subscribers (frames.go). Front doors attach subscribers and
// drain them; the service never blocks on them.

// Attach makes sub a subscriber of session id's frames. A subscriber joining mid-run first gets that
// run's outputs so far (a RunningFrame), then the live ones: joining and copying happen under the
// run's lock, so nothing is doubled or missed. detach removes it again.
func (s *Service) Attach(id string, sub *Subscriber) (detach func(), err error) {
	ls, err := s.Session(id)
	if err != nil {
		return nil, err
	}
	sub.dropM.Store(&s.m.droppedFrames)
	ls.mu.Lock()
	if act := ls.running; act != nil {
		act.mu.Lock()
		ls.hub.add(sub)
		sub.Send(act.frameLocked())
		act.mu.Unlock()
	} else {
		ls.hub.add(sub)
	}
	ls.mu.Unlock()
	return func() { ls.hub.remove(sub) }, nil
}

// SubscribeEvents sends sub the stored events after sequence after, then live ones, each once
// (deduplicated by sequence): under the hub lock, an event appended meanwhile is either in the
// backlog or sent live.
func (s *Service) SubscribeEvents(ctx context.Context, id string, sub *Subscriber, after int64) error {
	ls, err := s.Session(id)
	if err != nil {
		return err
	}
	h := &ls.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	sub.afterEv.Store(after)
	evs, err := s.store.ListEvents(ctx, id, after, 100000, "")
	if err != nil {
		return err
	}
	for _, ev := range evs {
		sub.Send(EventFrame{Type: "event", Event: ev})
		sub.afterEv.Store(ev.SequenceNumber)
	}
	sub.events.Store(true)
	return nil
}

// AnswerInput delivers the reply to run runID's pending input() prompt; a conflict when none is pending.
func (ls *Session) AnswerInput(runID, value string) error {
	ls.mu.Lock()
	act := ls.running
	ls.mu.Unlock()
	if act == nil || !act.answer(runID, value) {
		return carryover.Errorf(carryover.CodeConflict, "no input is pending for %q", runID)
	}
	return nil
}

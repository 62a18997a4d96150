package session

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/stream"
)

// A session streams its runs' frames to subscribers (package stream). Front doors attach
// subscribers and drain them; the service never blocks on them.

// Attach makes sub a subscriber of the session's frames. A subscriber joining mid-run first gets
// that run's outputs so far (a RunningFrame), then the live ones: joining and copying happen under
// the run's lock, so nothing is doubled or missed. detach removes it again.
func (ls *Session) Attach(sub *stream.Subscriber) (detach func()) {
	sub.CountDrops(ls.svc.m.DroppedFrames)
	ls.mu.Lock()
	if act := ls.running; act != nil {
		act.mu.Lock()
		ls.hub.Add(sub)
		sub.Send(act.frameLocked())
		act.mu.Unlock()
	} else {
		ls.hub.Add(sub)
	}
	ls.mu.Unlock()
	return func() { ls.hub.Remove(sub) }
}

// SubscribeEvents sends sub the stored events after sequence after, page by page, then live ones,
// each once (stream.Hub.SubscribeEvents).
func (ls *Session) SubscribeEvents(ctx context.Context, sub *stream.Subscriber, after int64) error {
	return ls.hub.SubscribeEvents(ctx, sub, after, func(after int64, limit int) ([]carryover.Event, error) {
		return ls.svc.store.ListEvents(ctx, ls.id, carryover.EventQuery{After: after, Limit: limit})
	})
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

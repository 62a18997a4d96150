package stream

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
)

// A session's events reach a subscriber each once and in sequence order, however long its log and
// however slowly it reads: from the store first (the backlog it asked for, read a page at a time
// and queued at its pace), then live. A live event its full queue cannot take is not lost: the
// subscriber leaves live delivery and takes the events it missed from the store, at its pace,
// then joins again. Output frames are dropped for a slow client (a notice tells it); events are
// the log a client keeps its place in, and the store has them all.

// backlogPage is how many stored events are read at a time.
const backlogPage = 1000

// backlogPoll is how often a subscription waiting for room in a queue looks again.
const backlogPoll = 2 * time.Millisecond

// errClosed is a subscription's answer when the subscriber was closed (its client went away).
var errClosed = errors.New("stream: the subscriber is closed")

// EventPage answers up to limit stored events after sequence after, oldest first.
type EventPage func(after int64, limit int) ([]carryover.Event, error)

// eventSub is a subscriber's subscription to the session's events.
type eventSub struct {
	live     atomic.Bool               // live events are sent to it
	after    atomic.Int64              // the highest sequence queued for it
	page     atomic.Pointer[EventPage] // where its events are stored (SubscribeEvents)
	paging   sync.Mutex                // one subscription or catch-up reads the store for it at a time
	catching atomic.Bool               // a catch-up is running (catchUpLater)
}

// LogEvent appends an event with add and broadcasts it, one event at a time. The store numbers
// events in the order they are appended, and they must go out in that order: BroadcastEvent takes
// an event older than the newest a subscriber got for a duplicate, so two requests logging at once
// (eight clients' heartbeats) whose broadcasts crossed lost the earlier event to live subscribers.
func (h *Hub) LogEvent(add func() (carryover.Event, error)) (carryover.Event, error) {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	ev, err := add()
	if err == nil {
		h.BroadcastEvent(ev)
	}
	return ev, err
}

// BroadcastEvent sends an event frame to the live subscribers that have not seen it. One whose
// queue is full catches up from the store instead (catchUpLater).
func (h *Hub) BroadcastEvent(ev carryover.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var frame []byte
	for s := range h.subs {
		if !s.evs.live.Load() || s.evs.after.Load() >= ev.SequenceNumber {
			continue
		}
		if frame == nil {
			var err error
			if frame, err = json.Marshal(EventFrame{Type: "event", Event: ev}); err != nil {
				return
			}
		}
		if s.offer(frame) {
			s.evs.after.Store(ev.SequenceNumber)
		} else {
			h.catchUpLater(s)
		}
	}
}

// SubscribeEvents sends sub the stored events after sequence after, marked backlog, then live ones
// (stream doc above). It returns once the backlog is queued, or with ctx's error or errClosed
// when the client went away first. Only the last page is read under the hub lock, so that an event
// appended meanwhile is either in it or sent live; the others are read and queued outside it, and
// the session's other frames flow meanwhile (half the queue is kept for them).
func (h *Hub) SubscribeEvents(ctx context.Context, sub *Subscriber, after int64, page EventPage) error {
	sub.evs.page.Store(&page)
	return h.subscribe(ctx, sub, after, page, true)
}

// subscribe queues sub's stored events after sequence after (marked backlog when asked) at its
// pace, then turns live delivery on.
func (h *Hub) subscribe(ctx context.Context, sub *Subscriber, after int64, page EventPage, backlog bool) error {
	sub.evs.paging.Lock()
	defer sub.evs.paging.Unlock()
	sub.evs.live.Store(false) // a second subscription starts over: live events wait for its backlog
	sub.evs.after.Store(after)
	for {
		evs, err := page(sub.evs.after.Load(), backlogPage)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := sub.sendStored(ctx, ev, backlog); err != nil {
				return err
			}
		}
		if len(evs) == backlogPage {
			continue
		}
		if err := sub.waitRoom(ctx); err != nil {
			return err
		}
		if done, err := h.goLive(sub, page, backlog); done || err != nil {
			return err
		}
	}
}

// goLive queues, under the hub lock, the events logged since sub's last, and when they were fewer
// than a page and all fit in its queue turns its live delivery on (done). Otherwise the rest is
// left for another round outside the lock.
func (h *Hub) goLive(sub *Subscriber, page EventPage, backlog bool) (done bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs, err := page(sub.evs.after.Load(), backlogPage)
	if err != nil {
		return false, err
	}
	for _, ev := range evs {
		frame, err := json.Marshal(EventFrame{Type: "event", Event: ev, Backlog: backlog})
		if err != nil {
			return false, err
		}
		if !sub.offer(frame) {
			return false, nil
		}
		sub.evs.after.Store(ev.SequenceNumber)
	}
	if len(evs) == backlogPage {
		return false, nil
	}
	sub.evs.live.Store(true)
	return true, nil
}

// catchUpLater takes s, which missed a live event, off live delivery and has it take the events
// it missed from the store, at its pace, then join again (from a goroutine: the hub is locked).
func (h *Hub) catchUpLater(s *Subscriber) {
	s.evs.live.Store(false)
	page := s.evs.page.Load()
	select {
	case <-s.closed:
		return
	default:
	}
	if page == nil || !s.evs.catching.CompareAndSwap(false, true) {
		return // never subscribed, or a catch-up runs (and goes round again if it must)
	}
	go h.catchUp(s, *page)
}

// catchUp runs catch-ups of s until it is live: a drop while one was finishing finds catching set
// and leaves the next round to this loop. The events it sends are live ones late, not backlog. A
// store that fails it is told to the client (it then has events only by listing them).
func (h *Hub) catchUp(s *Subscriber, page EventPage) {
	for {
		err := h.subscribe(context.Background(), s, s.evs.after.Load(), page, false)
		s.evs.catching.Store(false)
		if err != nil {
			s.Send(ErrorFrame{Type: "error", Error: carryover.ErrorOf(
				carryover.Errorf(carryover.CodeInternal, "live events stopped after sequence %d: %v", s.evs.after.Load(), err))})
			return
		}
		if s.evs.live.Load() || !s.evs.catching.CompareAndSwap(false, true) {
			return
		}
	}
}

// sendStored queues one stored event once the queue has room, and records it as sub's last.
func (s *Subscriber) sendStored(ctx context.Context, ev carryover.Event, backlog bool) error {
	frame, err := json.Marshal(EventFrame{Type: "event", Event: ev, Backlog: backlog})
	if err != nil {
		return err
	}
	if err := s.waitRoom(ctx); err != nil {
		return err
	}
	s.tellDrops() // what it missed meanwhile comes before what follows
	select {
	case s.out <- frame:
		s.evs.after.Store(ev.SequenceNumber)
		return nil
	case <-s.closed:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitRoom waits while s's queue is over half full: stored events go at the client's pace, and
// leave room for its live frames.
func (s *Subscriber) waitRoom(ctx context.Context) error {
	var wait *time.Timer
	for len(s.out) > cap(s.out)/2 {
		if wait == nil {
			wait = time.NewTimer(backlogPoll)
			defer wait.Stop()
		} else {
			wait.Reset(backlogPoll)
		}
		select {
		case <-s.closed:
			return errClosed
		case <-ctx.Done():
			return ctx.Err()
		case <-wait.C:
		}
	}
	return nil
}

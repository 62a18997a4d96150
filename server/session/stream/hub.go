package stream

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
	"github.com/prometheus/client_golang/prometheus"
)

// Subscriber is one client of a session's stream (a websocket today). Frames go through a bounded
// queue so a slow or vanished client never blocks the kernel, the record or other clients: when the
// queue is full the frame is dropped for this client only, and a notice tells it how many it missed.
type Subscriber struct {
	out     chan []byte
	events  atomic.Bool                        // subscribed to events
	comms   atomic.Bool                        // gets the comm relay's frames (WantComms)
	afterEv atomic.Int64                       // highest event sequence delivered
	dropped atomic.Int64                       // frames dropped since the last notice
	dropM   atomic.Pointer[prometheus.Counter] // counts the drops (CountDrops)
	closed  chan struct{}
	once    sync.Once
}

const subscriberQueue = 4096

// NewSubscriber returns a subscriber with an empty queue.
func NewSubscriber() *Subscriber {
	return &Subscriber{out: make(chan []byte, subscriberQueue), closed: make(chan struct{})}
}

// Frames is the queue of JSON frames to deliver, in order.
func (s *Subscriber) Frames() <-chan []byte { return s.out }

// Closed is closed once Close was called.
func (s *Subscriber) Closed() <-chan struct{} { return s.closed }

// Close stops queueing; what is queued may still be drained.
func (s *Subscriber) Close() { s.once.Do(func() { close(s.closed) }) }

// Send queues v (marshalled to JSON) without blocking; it reports whether it was queued.
func (s *Subscriber) Send(v any) bool {
	b, err := json.Marshal(v)
	return err == nil && s.send(b)
}

// send queues a frame without blocking; it reports whether the frame was queued.
func (s *Subscriber) send(frame []byte) bool {
	select {
	case <-s.closed:
		return false
	default:
	}
	if n := s.dropped.Load(); n > 0 {
		notice, _ := json.Marshal(NoticeFrame{Type: "notice",
			Message: "output frames were dropped for this slow client; the stored record is complete", Dropped: n})
		select {
		case s.out <- notice:
			s.dropped.Add(-n)
		default:
		}
	}
	select {
	case s.out <- frame:
		return true
	default:
		s.dropped.Add(1)
		if c := s.dropM.Load(); c != nil {
			(*c).Inc()
		}
		return false
	}
}

// errClosed is SubscribeEvents' answer when the subscriber was closed (its client went away) before
// its backlog was queued.
var errClosed = errors.New("stream: the subscriber is closed")

// backlogPoll is how often sendBacklog looks again at a queue over half full.
const backlogPoll = 2 * time.Millisecond

// sendBacklog queues one stored event, waiting while the queue is over half full: a long backlog
// goes at the client's pace, none of it dropped, and leaves room for live frames meanwhile.
func (s *Subscriber) sendBacklog(ctx context.Context, ev carryover.Event) error {
	frame, err := json.Marshal(EventFrame{Type: "event", Event: ev, Backlog: true})
	if err != nil {
		return err
	}
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
	select {
	case s.out <- frame:
		return nil
	case <-s.closed:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hub fans a session's frames out to its subscribers. Its zero value has none.
type Hub struct {
	mu    sync.Mutex
	subs  map[*Subscriber]struct{}
	logMu sync.Mutex // LogEvent's: one event appended and broadcast at a time
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

// Add makes s a subscriber.
func (h *Hub) Add(s *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[*Subscriber]struct{}{}
	}
	h.subs[s] = struct{}{}
}

// Remove drops subscriber s.
func (h *Hub) Remove(s *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

// Broadcast sends v (marshalled once) to every subscriber.
func (h *Hub) Broadcast(v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	frame, err := json.Marshal(v)
	if err != nil {
		return
	}
	for s := range h.subs {
		s.send(frame)
	}
}

// BroadcastEvent sends an event frame to subscribers that asked for events and have not seen it.
func (h *Hub) BroadcastEvent(ev carryover.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var frame []byte
	for s := range h.subs {
		if !s.events.Load() || s.afterEv.Load() >= ev.SequenceNumber {
			continue
		}
		if frame == nil {
			var err error
			if frame, err = json.Marshal(EventFrame{Type: "event", Event: ev}); err != nil {
				return
			}
		}
		if s.send(frame) {
			s.afterEv.Store(ev.SequenceNumber)
		}
	}
}

// WantComms has sub receive the comm relay's frames (a websocket opened with ?comms=true: the
// browser UI). Other clients never see them.
func (s *Subscriber) WantComms() { s.comms.Store(true) }

// HasComms says whether some subscriber wants comm frames.
func (h *Hub) HasComms() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if sub.comms.Load() {
			return true
		}
	}
	return false
}

// BroadcastComms sends v (marshalled once) to the subscribers that want comm frames.
func (h *Hub) BroadcastComms(v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var frame []byte
	for sub := range h.subs {
		if !sub.comms.Load() {
			continue
		}
		if frame == nil {
			var err error
			if frame, err = json.Marshal(v); err != nil {
				return
			}
		}
		sub.send(frame)
	}
}

// CountDrops has s count the frames it drops in c (the service's carryover_ws_dropped_frames_total).
func (s *Subscriber) CountDrops(c prometheus.Counter) { s.dropM.Store(&c) }

// backlogPage is how many stored events SubscribeEvents reads at a time.
const backlogPage = 1000

// EventPage answers up to limit stored events after sequence after, oldest first.
type EventPage func(after int64, limit int) ([]carryover.Event, error)

// SubscribeEvents sends sub the stored events after sequence after, page by page, then live ones,
// each once, in order (deduplicated by sequence). The pages are read and queued outside the hub
// lock, paced by the client's reading (a backlog of any length is sent whole, never dropped, and
// the session's other frames are not held up meanwhile); only the last page, the events logged
// while the others were sent, is read under the lock, so that an event appended meanwhile is
// either in it or sent live. It returns when the backlog is queued, or with ctx's error or
// errClosed when the client went away first.
func (h *Hub) SubscribeEvents(ctx context.Context, sub *Subscriber, after int64, page EventPage) error {
	sub.events.Store(false) // a second subscription starts over: live events wait for its backlog
	for {
		evs, err := page(after, backlogPage)
		if err != nil {
			return err
		}
		if len(evs) < backlogPage {
			done, err := h.catchUp(sub, after, page)
			if done || err != nil {
				return err
			}
			after = sub.afterEv.Load()
			continue
		}
		for _, ev := range evs {
			if err := sub.sendBacklog(ctx, ev); err != nil {
				return err
			}
			after = ev.SequenceNumber
		}
	}
}

// catchUp reads the events after sequence after under the hub lock and queues them; when they are
// fewer than a page it turns live delivery on (done). A full page (events logged fast while the
// backlog was sent) is queued and left for another round outside the lock.
func (h *Hub) catchUp(sub *Subscriber, after int64, page EventPage) (done bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs, err := page(after, backlogPage)
	if err != nil {
		return false, err
	}
	sub.afterEv.Store(after)
	for _, ev := range evs {
		sub.Send(EventFrame{Type: "event", Event: ev, Backlog: true})
		sub.afterEv.Store(ev.SequenceNumber)
	}
	if len(evs) == backlogPage {
		return false, nil
	}
	sub.events.Store(true)
	return true, nil
}

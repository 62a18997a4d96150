package stream

import (
	"encoding/json"
	"sync"
	"sync/atomic"

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

// Hub fans a session's frames out to its subscribers. Its zero value has none.
type Hub struct {
	mu   sync.Mutex
	subs map[*Subscriber]struct{}
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

// SubscribeEvents sends sub the events backlog gives (those after sequence after, from the store),
// then live ones, each once (deduplicated by sequence): under the hub lock, an event appended
// meanwhile is either in the backlog or sent live.
func (h *Hub) SubscribeEvents(sub *Subscriber, after int64, backlog func() ([]carryover.Event, error)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub.afterEv.Store(after)
	evs, err := backlog()
	if err != nil {
		return err
	}
	for _, ev := range evs {
		sub.Send(EventFrame{Type: "event", Event: ev, Backlog: true})
		sub.afterEv.Store(ev.SequenceNumber)
	}
	sub.events.Store(true)
	return nil
}

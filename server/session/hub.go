package session

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
	comms   atomic.Bool                        // gets the comm relay's frames (comms.go)
	afterEv atomic.Int64                       // highest event sequence delivered
	dropped atomic.Int64                       // frames dropped since the last notice
	dropM   atomic.Pointer[prometheus.Counter] // the service's carryover_ws_dropped_frames_total (Attach)
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

// hub fans a session's frames out to its subscribers.
type hub struct {
	mu   sync.Mutex
	subs map[*Subscriber]struct{}
}

func (h *hub) add(s *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[*Subscriber]struct{}{}
	}
	h.subs[s] = struct{}{}
}

func (h *hub) remove(s *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

// broadcast sends v (marshalled once) to every subscriber.
func (h *hub) broadcast(v any) {
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

// broadcastEvent sends an event frame to subscribers that asked for events and have not seen it.
func (h *hub) broadcastEvent(ev carryover.Event) {
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

package session

import (
	"encoding/json"
	"sync"
	"sync/atomic"
)

// subscriber is one websocket client of a session. Frames go through a bounded queue so a slow or
// vanished client never blocks the kernel, the record or other clients: when the queue is full the
// frame is dropped for this client only, and a notice tells it how many it missed.
type subscriber struct {
	out     chan []byte
	events  atomic.Bool  // subscribed to events
	afterEv atomic.Int64 // highest event sequence delivered
	dropped atomic.Int64 // frames dropped since the last notice
	closed  chan struct{}
	once    sync.Once
}

const subscriberQueue = 4096

func newSubscriber() *subscriber {
	return &subscriber{out: make(chan []byte, subscriberQueue), closed: make(chan struct{})}
}

// send queues a frame without blocking; it reports whether the frame was queued.
func (s *subscriber) send(frame []byte) bool {
	select {
	case <-s.closed:
		return false
	default:
	}
	if n := s.dropped.Load(); n > 0 {
		notice, _ := json.Marshal(map[string]any{"type": "notice",
			"message": "output frames were dropped for this slow client; the stored record is complete", "dropped": n})
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
		droppedFrames.Inc()
		return false
	}
}

func (s *subscriber) close() { s.once.Do(func() { close(s.closed) }) }

// hub fans a session's frames out to its subscribers.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

func (h *hub) add(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[*subscriber]struct{}{}
	}
	h.subs[s] = struct{}{}
}

func (h *hub) remove(s *subscriber) {
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
func (h *hub) broadcastEvent(seq int64, v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var frame []byte
	for s := range h.subs {
		if !s.events.Load() || s.afterEv.Load() >= seq {
			continue
		}
		if frame == nil {
			var err error
			if frame, err = json.Marshal(v); err != nil {
				return
			}
		}
		if s.send(frame) {
			s.afterEv.Store(seq)
		}
	}
}

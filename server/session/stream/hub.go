package stream

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Subscriber is one client of a session's stream (a websocket today). Frames go through a bounded
// queue so a slow or vanished client never blocks the kernel, the record or other clients: when the
// queue is full the frame is dropped for this client only, and a notice tells it how many it missed.
type Subscriber struct {
	out          chan []byte
	comms        atomic.Bool                        // gets the comm relay's frames (WantComms)
	dropped      atomic.Int64                       // frames dropped since the last notice
	droppedComms atomic.Int64                       // of which comm frames (widget messages)
	dropM        atomic.Pointer[prometheus.Counter] // counts the drops (CountDrops)
	closed       chan struct{}
	once         sync.Once
	evs          eventSub // its subscription to the session's events (events.go)
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
func (s *Subscriber) send(frame []byte) bool { return s.sendAs(frame, false) }

// sendAs is send, counting a dropped frame as a comm frame when comm is set (the notice says what
// was lost, and what brings it back differs: the stored record, or a new connection).
func (s *Subscriber) sendAs(frame []byte, comm bool) bool {
	select {
	case <-s.closed:
		return false
	default:
	}
	s.tellDrops()
	select {
	case s.out <- frame:
		return true
	default:
		if comm {
			s.droppedComms.Add(1) // before the total, which tellDrops reads first
		}
		s.dropped.Add(1)
		if c := s.dropM.Load(); c != nil {
			(*c).Inc()
		}
		return false
	}
}

// tellDrops queues the notice of the frames dropped since the last one, if any and if it fits.
func (s *Subscriber) tellDrops() {
	if n := s.dropped.Load(); n > 0 {
		// A drop counted between the two reads may be told under the other kind (the totals stay
		// exact: what is subtracted is what was told); the drop path is not worth a lock for that.
		c := min(s.droppedComms.Load(), n)
		notice, _ := json.Marshal(NoticeFrame{Type: "notice", Message: dropMessage(n, c), Dropped: n})
		select {
		case s.out <- notice:
			s.dropped.Add(-n)
			s.droppedComms.Add(-c)
		default:
		}
	}
}

// dropMessage says what n dropped frames, c of them comm frames, were and what brings them back:
// output is in the stored record; a widget's state comes with the next connection (SyncWidgets).
func dropMessage(n, c int64) string {
	const output = "the stored record is complete"
	const widgets = "its widgets may be out of date until it connects again, which gets their live state"
	switch c {
	case 0:
		return "output frames were dropped for this slow client; " + output
	case n:
		return fmt.Sprintf("%s dropped for this slow client: %s", widgetMessages(c, "was", "were"), widgets)
	}
	return fmt.Sprintf("%d frames were dropped for this slow client: %d of output (%s) and %s (%s)",
		n, n-c, output, widgetMessages(c, "", ""), widgets)
}

// widgetMessages is "1 widget message" or "N widget messages", then verb one or many.
func widgetMessages(c int64, one, many string) string {
	if c == 1 {
		return strings.TrimSpace("1 widget message " + one)
	}
	return strings.TrimSpace(fmt.Sprintf("%d widget messages %s", c, many))
}

// offer queues a frame if the queue has room, and counts no drop when it has not: its caller (a
// live event's) catches the client up from the store instead.
func (s *Subscriber) offer(frame []byte) bool {
	select {
	case <-s.closed:
		return false
	case s.out <- frame:
		return true
	default:
		return false
	}
}

// Hub fans a session's frames out to its subscribers. Its zero value has none.
type Hub struct {
	mu    sync.Mutex
	subs  map[*Subscriber]struct{}
	logMu sync.Mutex // LogEvent's: one event appended and broadcast at a time (events.go)
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
		sub.sendAs(frame, true)
	}
}

// CountDrops has s count the frames it drops in c (the service's carryover_ws_dropped_frames_total).
func (s *Subscriber) CountDrops(c prometheus.Counter) { s.dropM.Store(&c) }

package kernel

// raw.go is the unparsed path onto a kernel, for proxying Jupyter's own protocol (a notebook's
// websocket): SendRaw signs and sends a message built elsewhere, Subscribe hands over every verified
// message received on a channel as raw JSON parts. It runs beside the parsed path: replies to our own
// requests still reach their waiters, and a subscriber sees them too.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// RawMessage is one Jupyter message with its JSON parts as they are on the wire.
type RawMessage struct {
	Channel      string          `json:"channel,omitempty"` // where it was received (SendRaw takes the channel as an argument)
	Header       json.RawMessage `json:"header"`
	ParentHeader json.RawMessage `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Buffers      [][]byte        `json:"-"`
}

// channelByName maps a Jupyter channel name to ours; hb is not a message channel.
func channelByName(name string) (channelKind, error) {
	for c := range chHB {
		if c.String() == name {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown channel %q (want shell, control, stdin or iopub)", name)
}

// SendRaw signs msg with the current process's key and sends it on shell, control or stdin. The
// header must be a JSON object (its msg_id is the caller's business: replies are routed to
// subscribers by channel, not to a waiter); empty parent header, metadata and content become {}.
// The kernel answers on shell and stdin to our socket identity, so replies come back through
// Subscribe of the same channel. A call during Restart waits for the new process.
func (k *Kernel) SendRaw(ctx context.Context, channel string, msg RawMessage) error {
	ch, err := channelByName(channel)
	if err != nil || ch == chIOPub {
		return fmt.Errorf("kernel %s: send raw: cannot send on channel %q", k.id, channel)
	}
	if !isObject(msg.Header) {
		return fmt.Errorf("kernel %s: send raw: header is not a JSON object", k.id)
	}
	parts := [][]byte{msg.Header, msg.ParentHeader, msg.Metadata, msg.Content}
	for i, p := range parts[1:] {
		if len(bytes.TrimSpace(p)) == 0 {
			parts[i+1] = emptyObject
		} else if !isObject(p) {
			return fmt.Errorf("kernel %s: send raw: %s is not a JSON object", k.id, [...]string{"parent_header", "metadata", "content"}[i])
		}
	}
	inst, err := k.live(ctx)
	if err != nil {
		return fmt.Errorf("kernel %s: send raw: %w", k.id, err)
	}
	if ch == chControl && msgType(msg.Header) == "interrupt_request" {
		k.interrupts.Add(1) // a client's own interrupt counts as Interrupt's does (LostReplyGrace)
	}
	frames := make([][]byte, 0, 6+len(msg.Buffers))
	frames = append(frames, delimiter, inst.sess.sign(parts...))
	frames = append(append(frames, parts...), msg.Buffers...)
	if err := inst.socks.send(ch, frames); err != nil {
		return fmt.Errorf("kernel %s: send raw: %w", k.id, err)
	}
	return nil
}

// msgType is a header's msg_type ("" when it has none).
func msgType(header []byte) string {
	var h struct {
		MsgType string `json:"msg_type"`
	}
	_ = json.Unmarshal(header, &h)
	return h.MsgType
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// Subscribe delivers every message received on channel (iopub, shell, control or stdin), across
// restarts, until cancel is called; cancel closes the returned channel. Messages are queued without
// bound so the readers never block: read them, or cancel.
func (k *Kernel) Subscribe(channel string) (<-chan RawMessage, func(), error) {
	ch, err := channelByName(channel)
	if err != nil {
		return nil, nil, fmt.Errorf("kernel %s: subscribe: %w", k.id, err)
	}
	s := &subscription{notify: make(chan struct{}, 1), stop: make(chan struct{}), out: make(chan RawMessage)}
	k.changeSubs(ch, func(list []*subscription) []*subscription { return append(list, s) })
	go s.pump()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			k.changeSubs(ch, func(list []*subscription) []*subscription {
				out := make([]*subscription, 0, len(list))
				for _, x := range list {
					if x != s {
						out = append(out, x)
					}
				}
				return out
			})
			close(s.stop)
		})
	}
	return s.out, cancel, nil
}

// changeSubs replaces the subscriber list of ch by a changed copy (the readers read it lock-free).
func (k *Kernel) changeSubs(ch channelKind, change func([]*subscription) []*subscription) {
	k.subsMu.Lock()
	defer k.subsMu.Unlock()
	var cur []*subscription
	if p := k.subs[ch].Load(); p != nil {
		cur = *p
	}
	next := change(append([]*subscription(nil), cur...))
	k.subs[ch].Store(&next)
}

// publishRaw hands a verified message to the subscribers of ch. It runs on the reader goroutines.
func (k *Kernel) publishRaw(ch channelKind, m *message) {
	p := k.subs[ch].Load()
	if p == nil || len(*p) == 0 {
		return
	}
	raw := RawMessage{Channel: ch.String(), Header: m.RawHeader, ParentHeader: m.RawParent,
		Metadata: m.Metadata, Content: m.Content, Buffers: m.Buffers}
	for _, s := range *p {
		s.push(raw)
	}
}

// subscription is one Subscribe: an unbounded queue drained into out by its own goroutine.
type subscription struct {
	mu     sync.Mutex
	queue  []RawMessage
	notify chan struct{} // 1-slot doorbell
	stop   chan struct{} // closed by cancel
	out    chan RawMessage
}

func (s *subscription) push(m RawMessage) {
	s.mu.Lock()
	s.queue = append(s.queue, m)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

var errSubscriptionDone = errors.New("subscription cancelled")

// pump forwards the queue in order until stop; then it closes out.
func (s *subscription) pump() {
	defer close(s.out)
	for {
		select {
		case <-s.notify:
		case <-s.stop:
			return
		}
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, m := range batch {
			if s.send(m) != nil {
				return
			}
		}
	}
}

func (s *subscription) send(m RawMessage) error {
	select {
	case s.out <- m:
		return nil
	case <-s.stop:
		return errSubscriptionDone
	}
}

// ParentID is the msg_id of the request m answers ("" when it has none or its parent is unreadable).
func (m RawMessage) ParentID() string {
	var h struct {
		MsgID string `json:"msg_id"`
	}
	_ = json.Unmarshal(m.ParentHeader, &h)
	return h.MsgID
}

// Type is m's msg_type ("" when the header is unreadable).
func (m RawMessage) Type() string {
	var h struct {
		MsgType string `json:"msg_type"`
	}
	_ = json.Unmarshal(m.Header, &h)
	return h.MsgType
}

// ExecutionState is the execution_state of a status message ("" for other messages).
func (m RawMessage) ExecutionState() string {
	var c struct {
		State string `json:"execution_state"`
	}
	_ = json.Unmarshal(m.Content, &c)
	return c.State
}

// Output is the cell output an iopub message carries (stream, display_data, update_display_data,
// execute_result, error, clear_output), decoded as Execute's OnOutput gets it; false for other messages.
func (m RawMessage) Output() (Output, bool) {
	t := m.Type()
	if !isOutput(t) {
		return Output{}, false
	}
	out, _ := decodeOutput(t, m.Content)
	return out, true
}

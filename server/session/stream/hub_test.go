package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestSlowSubscriberDropsAndIsTold: a subscriber whose queue is full loses frames (the sender never
// blocks), and once it drains, a notice with the count comes before the next frame; a subscriber
// that did not ask for events or comms gets neither.
func TestSlowSubscriberDropsAndIsTold(t *testing.T) {
	var h Hub
	slow, other := NewSubscriber(), NewSubscriber()
	h.Add(slow)
	h.Add(other)
	for range subscriberQueue + 3 {
		h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"})
	}
	if got := slow.dropped.Load(); got != 3 {
		t.Fatalf("dropped %d, want 3", got)
	}
	for range subscriberQueue {
		<-slow.Frames()
	}
	h.Broadcast(StatusFrame{Type: "status", ExecutionState: "idle"})
	var notice NoticeFrame
	if err := json.Unmarshal(<-slow.Frames(), &notice); err != nil || notice.Type != "notice" || notice.Dropped != 3 {
		t.Fatalf("first frame after draining = %+v, %v; want a notice of 3", notice, err)
	}
	var next StatusFrame
	if err := json.Unmarshal(<-slow.Frames(), &next); err != nil || next.ExecutionState != "idle" {
		t.Fatalf("then %+v, %v; want the idle status", next, err)
	}
	for len(other.Frames()) > 0 {
		<-other.Frames()
	}
	h.BroadcastEvent(carryover.Event{SequenceNumber: 1})
	h.BroadcastComms(CommResetFrame{Type: "comm_reset"})
	h.Remove(other)
	h.Broadcast(StatusFrame{Type: "status"})
	if n := len(other.Frames()); n != 0 {
		t.Fatalf("the other subscriber got %d frames: an event, a comm frame or one after its removal", n)
	}
}

// eventLog is a session's stored log for the subscription tests: appended under a lock, read in
// pages as the store's ListEvents answers them. reads counts the pages read.
type eventLog struct {
	mu    sync.Mutex
	evs   []carryover.Event
	reads int
}

func (l *eventLog) append(h *Hub) carryover.Event {
	l.mu.Lock()
	ev := carryover.Event{SequenceNumber: int64(len(l.evs)) + 1, EventType: "note"}
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
	if h != nil {
		h.BroadcastEvent(ev) // after the append commits, as Session.emit does
	}
	return ev
}

func (l *eventLog) page(after int64, limit int) ([]carryover.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	from := min(int(after), len(l.evs))
	return slices.Clone(l.evs[from:min(from+limit, len(l.evs))]), nil
}

// logged is a hub with a log of n events and one subscriber added, not subscribed yet.
func logged(n int) (*Hub, *eventLog, *Subscriber) {
	h, log, sub := &Hub{}, &eventLog{}, NewSubscriber()
	for range n {
		log.append(nil)
	}
	h.Add(sub)
	return h, log, sub
}

// drained is what drain read: the events' sequences, how many were marked backlog, and why it
// stopped early (nil: it saw the last sequence).
type drained struct {
	seqs    []int64
	backlog int
	err     error
}

// drain reads sub's event frames until it has seen sequence last (it runs beside the subscription,
// so it answers its failure rather than ending the test).
func drain(sub *Subscriber, last int64) (d drained) {
	for len(d.seqs) == 0 || d.seqs[len(d.seqs)-1] < last {
		select {
		case b := <-sub.Frames():
			var f EventFrame
			if err := json.Unmarshal(b, &f); err != nil || f.Type != "event" {
				d.err = fmt.Errorf("frame %s: %v", b, err)
				return d
			}
			d.seqs = append(d.seqs, f.Event.SequenceNumber)
			if f.Backlog {
				d.backlog++
			}
		case <-time.After(10 * time.Second):
			d.err = fmt.Errorf("no frame for 10 s after %d events (want up to sequence %d)", len(d.seqs), last)
			return d
		}
	}
	return d
}

func wantOneToN(t *testing.T, d drained, n int64) {
	t.Helper()
	if d.err != nil {
		t.Fatal(d.err)
	}
	seqs := d.seqs
	if int64(len(seqs)) != n {
		t.Fatalf("got %d events, want %d (each once)", len(seqs), n)
	}
	for i, s := range seqs {
		if s != int64(i)+1 {
			t.Fatalf("event %d is sequence %d: want 1..%d in order, each once", i, s, n)
		}
	}
}

// TestLongBacklogIsSentWhole: a subscription from the start of a 10,000-event log gets every event,
// in order, once, marked backlog, then a live one unmarked. Sent into the bounded queue without
// waiting (before), all but ~4,096 were dropped. The log is read in pages, not whole.
func TestLongBacklogIsSentWhole(t *testing.T) {
	h, log, sub := logged(10_000)
	got := make(chan drained)
	go func() { got <- drain(sub, 10_001) }()
	if err := h.SubscribeEvents(context.Background(), sub, 0, log.page); err != nil {
		t.Fatal(err)
	}
	log.append(h)
	d := <-got
	wantOneToN(t, d, 10_001)
	if d.backlog != 10_000 {
		t.Fatalf("%d events marked backlog, want the 10,000 stored before the subscription", d.backlog)
	}
	if log.reads < 10 {
		t.Fatalf("the log was read in %d pages: whole, not paged", log.reads)
	}
}

// TestBacklogMeetsLiveEvents: events logged while the backlog is being sent reach the subscriber
// exactly once and in order, whether it reads them from the store or live.
func TestBacklogMeetsLiveEvents(t *testing.T) {
	h, log, sub := logged(5_000)
	got := make(chan drained)
	go func() { got <- drain(sub, 8_000) }()
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for range 3_000 {
			log.append(h)
		}
	}()
	if err := h.SubscribeEvents(context.Background(), sub, 0, log.page); err != nil {
		t.Fatal(err)
	}
	<-appended
	wantOneToN(t, <-got, 8_000)
}

// TestBacklogWaitsOnItsClientAlone: a client that does not read holds up only its own backlog: the
// session's other frames are broadcast meanwhile (the hub is not locked), the backlog leaves half
// the queue for them, and the subscription ends when the client goes away.
func TestBacklogWaitsOnItsClientAlone(t *testing.T) {
	h, log, sub := logged(10_000)
	done := make(chan error)
	go func() { done <- h.SubscribeEvents(context.Background(), sub, 0, log.page) }()
	for len(sub.Frames()) < subscriberQueue/2 {
		time.Sleep(time.Millisecond)
	}
	broadcast := make(chan struct{})
	go func() { h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"}); close(broadcast) }()
	select {
	case <-broadcast:
	case <-time.After(10 * time.Second):
		t.Fatal("a broadcast waited on another client's backlog (the hub was locked)")
	}
	if n := sub.dropped.Load(); n != 0 {
		t.Fatalf("the live frame was dropped (%d): the backlog left no room", n)
	}
	sub.Close()
	select {
	case err := <-done:
		if !errors.Is(err, errClosed) {
			t.Fatalf("SubscribeEvents = %v, want errClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SubscribeEvents still waits on a closed client")
	}
}

// TestSlowSubscriberCatchesUpOnEvents: live events logged while a subscriber's queue is full of
// output are not lost to it: it takes them from the store once it reads again, each once, in
// order, not marked backlog (they are news), while the output frames it could not take are
// dropped and told. Before, those events were dropped like output (the log gap never closed).
func TestSlowSubscriberCatchesUpOnEvents(t *testing.T) {
	h, log, sub := logged(1)
	if err := h.SubscribeEvents(context.Background(), sub, 0, log.page); err != nil {
		t.Fatal(err)
	}
	for len(sub.Frames()) < subscriberQueue {
		h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"})
	}
	for range 300 {
		log.append(h)
		h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"}) // dropped: the queue is full
	}
	var seqs []int64
	var notices int64
	deadline := time.After(10 * time.Second)
	for len(seqs) == 0 || seqs[len(seqs)-1] < 301 {
		select {
		case b := <-sub.Frames():
			var f struct {
				Type    string
				Event   carryover.Event
				Backlog bool
				Dropped int64
			}
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			switch f.Type {
			case "event":
				if f.Backlog && f.Event.SequenceNumber > 1 {
					t.Fatalf("event %d, logged after the subscription, marked backlog", f.Event.SequenceNumber)
				}
				seqs = append(seqs, f.Event.SequenceNumber)
			case "notice":
				notices += f.Dropped
			}
		case <-deadline:
			t.Fatalf("after %d events (last %v), no frame for 10 s", len(seqs), seqs[max(0, len(seqs)-1):])
		}
	}
	wantOneToN(t, drained{seqs: seqs}, 301)
	if notices < 300 {
		t.Fatalf("notices told of %d dropped frames, want the 300 outputs", notices)
	}
	log.append(h) // live again
	if d := drain(sub, 302); d.err != nil || d.seqs[len(d.seqs)-1] != 302 {
		t.Fatalf("after the catch-up, the next live event: %+v", d)
	}
}

// TestDropNoticeSaysWhatWasLost: a notice tells comm frames (widget messages, which only a new
// connection brings back) apart from output (in the stored record); it said "output" of both.
func TestDropNoticeSaysWhatWasLost(t *testing.T) {
	var h Hub
	slow := NewSubscriber()
	slow.WantComms()
	h.Add(slow)
	notice := func() NoticeFrame {
		t.Helper()
		for len(slow.Frames()) > 0 {
			<-slow.Frames()
		}
		h.Broadcast(StatusFrame{Type: "status", ExecutionState: "idle"}) // brings the notice first
		var n NoticeFrame
		if err := json.Unmarshal(<-slow.Frames(), &n); err != nil || n.Type != "notice" {
			t.Fatalf("first frame after draining = %+v, %v; want a notice", n, err)
		}
		<-slow.Frames()
		return n
	}
	fill := func() {
		for range subscriberQueue {
			h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"})
		}
	}
	comm := CommFrame{Type: "comm", MsgType: "comm_msg", Content: json.RawMessage(`{}`)}

	fill()
	h.BroadcastComms(comm)
	h.BroadcastComms(comm)
	if n := notice(); n.Dropped != 2 || n.Message != "2 widget messages were dropped for this slow client: its widgets may be out of date until it connects again, which gets their live state" {
		t.Errorf("comm frames only: %+v", n)
	}
	fill()
	h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"})
	h.BroadcastComms(comm)
	h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"})
	if n := notice(); n.Dropped != 3 || !strings.Contains(n.Message, "3 frames were dropped") ||
		!strings.Contains(n.Message, "2 of output (the stored record is complete)") || !strings.Contains(n.Message, "and 1 widget message (") {
		t.Errorf("both: %+v", n)
	}
	fill()
	h.Broadcast(StatusFrame{Type: "status", ExecutionState: "busy"})
	if n := notice(); n.Dropped != 1 || n.Message != "output frames were dropped for this slow client; the stored record is complete" {
		t.Errorf("output only (the counts were reset by the notices before): %+v", n)
	}
}

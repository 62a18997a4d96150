package stream

import (
	"encoding/json"
	"testing"

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

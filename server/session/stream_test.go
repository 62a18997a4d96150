package session

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/stream"
)

// nextFrame reads one frame of sub as a map, or fails after a second.
func nextFrame(t *testing.T, sub *stream.Subscriber) map[string]any {
	t.Helper()
	select {
	case b := <-sub.Frames():
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	case <-time.After(time.Second):
		t.Fatal("no frame")
		return nil
	}
}

func TestSubscribeEventsBacklogThenLive(t *testing.T) {
	ctx := context.Background()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "e"})
	if _, err := s.Heartbeat(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Heartbeat(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	sub := stream.NewSubscriber()
	if err := handleOf(t, s, "e").SubscribeEvents(ctx, sub, 1); err != nil { // the client saw event 1
		t.Fatal(err)
	}
	defer handleOf(t, s, "e").Attach(sub)()
	if f := nextFrame(t, sub); f["type"] != "event" || f["event"].(map[string]any)["sequence_number"] != 2.0 || f["backlog"] != true {
		t.Fatalf("backlog frame = %v, want event 2 only, marked backlog", f)
	}
	if _, err := s.Pause(ctx, "e"); err == nil {
		t.Fatal("a pending session was paused")
	}
	if _, err := s.Heartbeat(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	f := nextFrame(t, sub)
	ev := f["event"].(map[string]any)
	if ev["sequence_number"] != 3.0 || ev["event_type"] != carryover.EventHeartbeat || f["backlog"] != nil {
		t.Fatalf("live frame = %v (a live event is not marked backlog)", f)
	}
	if _, err := s.Session("nope"); carryover.ErrorCode(err) != carryover.CodeNotFound {
		t.Fatalf("unknown session: %v", err)
	}
}

func TestDeleteTellsSubscribers(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "d"})
	sub := stream.NewSubscriber()
	handleOf(t, s, "d").Attach(sub)
	if err := s.Delete(context.Background(), "d"); err != nil {
		t.Fatal(err)
	}
	f := nextFrame(t, sub)
	if f["type"] != "error" || f["error"].(map[string]any)["code"] != string(carryover.CodeNotFound) {
		t.Fatalf("frame = %v, want a not_found error", f)
	}
}

func TestAnswerInputWithoutPrompt(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "i"})
	err := handleOf(t, s, "i").AnswerInput("run-1", "x")
	wantCode(t, err, carryover.CodeConflict)
}

func TestActiveRunInput(t *testing.T) {
	var h stream.Hub
	sub := stream.NewSubscriber()
	h.Add(sub)
	a := &activeRun{id: "r1", code: "input()"}
	if a.answer("r1", "early") {
		t.Fatal("an answer with no prompt pending was taken")
	}
	got := make(chan string, 1)
	go func() {
		v, _ := a.askInput(context.Background(), &h, kernel.InputRequest{Prompt: "name?"})
		got <- v
	}()
	if f := nextFrame(t, sub); f["type"] != "input_request" || f["prompt"] != "name?" {
		t.Fatalf("frame = %v", f)
	}
	if a.answer("r2", "x") {
		t.Fatal("an answer for another run was taken")
	}
	if !a.answer("r1", "Ada") {
		t.Fatal("the answer was refused")
	}
	if v := <-got; v != "Ada" {
		t.Fatalf("input() got %q", v)
	}
}

// TestConcurrentEventsReachSubscribersInOrder: events logged at once by several requests (eight
// clients' heartbeats) reach a subscriber each once and in sequence order. Appended in one order
// and broadcast in another, a later event went out first and the earlier one was then taken for a
// duplicate and never sent.
func TestConcurrentEventsReachSubscribersInOrder(t *testing.T) {
	ctx := context.Background()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "c"})
	sub := stream.NewSubscriber()
	ls := handleOf(t, s, "c")
	defer ls.Attach(sub)()
	if err := ls.SubscribeEvents(ctx, sub, 0); err != nil {
		t.Fatal(err)
	}
	const clients, each = 8, 100
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := s.Heartbeat(ctx, "c"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var got []float64
	for len(sub.Frames()) > 0 {
		if f := nextFrame(t, sub); f["type"] == "event" {
			got = append(got, f["event"].(map[string]any)["sequence_number"].(float64))
		}
	}
	for i, seq := range got {
		if seq != float64(i+1) {
			t.Fatalf("event frame %d is sequence %v (%d frames of %d events): want 1..%d, each once, in order",
				i, seq, len(got), clients*each, clients*each)
		}
	}
	if len(got) != clients*each {
		t.Fatalf("%d event frames, want %d", len(got), clients*each)
	}
}

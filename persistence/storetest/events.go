package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/carryover/carryover"
)

// testEventsGapless: 8 goroutines appending 50 events each to one session get exactly 1..400, while
// another session counts on its own; appending to a missing session is not found.
func testEventsGapless(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	session(t, s, "b")
	const workers, each, others = 8, 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := s.AppendEvent(ctx, "a", "status", map[string]int{"w": w, "i": i}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range others {
			if _, err := s.AppendEvent(ctx, "b", "status", i); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for sid, want := range map[string]int{"a": workers * each, "b": others} {
		evs, err := s.ListEvents(ctx, sid, carryover.EventQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != want {
			t.Fatalf("%s: %d events, want %d", sid, len(evs), want)
		}
		for i, ev := range evs {
			if ev.SequenceNumber != int64(i+1) || ev.SessionID != sid {
				t.Fatalf("%s: event %d has seq %d (session %q): gap or duplicate", sid, i, ev.SequenceNumber, ev.SessionID)
			}
		}
	}
	_, err := s.AppendEvent(ctx, "missing", "x", 1)
	wantCode(t, "append to a missing session", err, carryover.CodeNotFound)
}

// testEventsListing: after, before, limit, type filters and newest first, payload round trips, invalid JSON refused.
func testEventsListing(t *testing.T, s carryover.Store) {
	ctx := context.Background()
	session(t, s, "a")
	for i := 1; i <= 10; i++ {
		typ := "status"
		if i%3 == 0 {
			typ = "output"
		}
		ev, err := s.AppendEvent(ctx, "a", typ, map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		if ev.SequenceNumber != int64(i) || ev.CreatedAt.IsZero() || ev.EventType != typ {
			t.Fatalf("append %d returned %+v", i, ev)
		}
	}
	raw, err := s.AppendEvent(ctx, "a", "raw", json.RawMessage(`{"already":"json"}`))
	if err != nil || raw.SequenceNumber != 11 {
		t.Fatalf("raw payload: %+v %v", raw, err)
	}
	if _, err := s.AppendEvent(ctx, "a", "bad", json.RawMessage(`{nope`)); err == nil {
		t.Fatal("invalid JSON payload accepted")
	}
	type q = carryover.EventQuery
	cases := []struct {
		q    q
		want string
	}{
		{q{}, "1 2 3 4 5 6 7 8 9 10 11 "},
		{q{After: 4}, "5 6 7 8 9 10 11 "},
		{q{After: 4, Limit: 3}, "5 6 7 "},
		{q{Type: "output"}, "3 6 9 "},
		{q{After: 3, Limit: 1, Type: "output"}, "6 "},
		{q{After: 11}, ""},
		{q{Before: 4}, "1 2 3 "},
		{q{After: 2, Before: 6}, "3 4 5 "},
		{q{Before: 1}, ""},
		{q{Newest: true, Limit: 3}, "11 10 9 "},
		{q{Newest: true, Before: 9, Limit: 3}, "8 7 6 "},
		{q{Newest: true, Before: 9, Limit: 2, Type: "output"}, "6 3 "},
		{q{Newest: true, After: 9}, "11 10 "},
	}
	for _, c := range cases {
		evs, err := s.ListEvents(ctx, "a", c.q)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, e := range evs {
			got += fmt.Sprint(e.SequenceNumber, " ")
		}
		if got != c.want {
			t.Errorf("%+v: got %q want %q", c.q, got, c.want)
		}
	}
	evs, _ := s.ListEvents(ctx, "a", q{After: 10})
	if len(evs) != 1 || string(evs[0].Payload) != `{"already":"json"}` || evs[0].EventType != "raw" {
		t.Fatalf("payload round trip: %+v", evs)
	}
	if evs, _ = s.ListEvents(ctx, "a", q{Limit: 1}); len(evs) != 1 || string(evs[0].Payload) != `{"i":1}` {
		t.Fatalf("marshalled payload %+v", evs)
	}
	if evs, err := s.ListEvents(ctx, "unknown", q{}); err != nil || len(evs) != 0 {
		t.Fatalf("events of an unknown session: %+v %v", evs, err)
	}
}

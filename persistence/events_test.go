package persistence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/carryover/carryover"
)

func TestEventsGaplessUnderConcurrency(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	sessionT(t, s, "b")
	const workers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := []string{"a", "b"}[w%2]
			for i := range each {
				typ := "even"
				if i%2 == 1 {
					typ = "odd"
				}
				if _, err := s.AppendEvent(ctx, sid, typ, map[string]int{"w": w, "i": i}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, sid := range []string{"a", "b"} {
		evs, err := s.ListEvents(ctx, sid, 0, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := workers / 2 * each; len(evs) != want {
			t.Fatalf("%s: %d events, want %d", sid, len(evs), want)
		}
		for i, ev := range evs {
			if ev.SequenceNumber != int64(i+1) || ev.SessionID != sid {
				t.Fatalf("%s: event %d has seq %d (session %q): gap or duplicate", sid, i, ev.SequenceNumber, ev.SessionID)
			}
		}
	}
}

func TestEventsFilters(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "a")
	for i := 1; i <= 10; i++ {
		typ := "status"
		if i%3 == 0 {
			typ = "output"
		}
		ev, err := s.AppendEvent(ctx, "a", typ, map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		if ev.SequenceNumber != int64(i) || ev.CreatedAt.IsZero() {
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
	if _, err := s.AppendEvent(ctx, "missing", "x", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("append to missing session: %v", err)
	}

	seqs := func(evs []carryover.Event) string {
		out := ""
		for _, e := range evs {
			out += fmt.Sprint(e.SequenceNumber, " ")
		}
		return out
	}
	cases := []struct {
		after int64
		limit int
		typ   string
		want  string
	}{
		{0, 0, "", "1 2 3 4 5 6 7 8 9 10 11 "},
		{4, 0, "", "5 6 7 8 9 10 11 "},
		{4, 3, "", "5 6 7 "},
		{0, 0, "output", "3 6 9 "},
		{3, 1, "output", "6 "},
		{11, 0, "", ""},
	}
	for _, c := range cases {
		evs, err := s.ListEvents(ctx, "a", c.after, c.limit, c.typ)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(evs); got != c.want {
			t.Errorf("after=%d limit=%d type=%q: got %q want %q", c.after, c.limit, c.typ, got, c.want)
		}
	}
	evs, _ := s.ListEvents(ctx, "a", 10, 0, "")
	if len(evs) != 1 || string(evs[0].Payload) != `{"already":"json"}` || evs[0].EventType != "raw" {
		t.Fatalf("payload round trip: %+v", evs)
	}
	evs, _ = s.ListEvents(ctx, "a", 0, 1, "")
	if string(evs[0].Payload) != `{"i":1}` {
		t.Fatalf("marshalled payload %s", evs[0].Payload)
	}
}

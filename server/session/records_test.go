package session

import (
	"context"
	"testing"

	"github.com/carryover/carryover"
)

// TestEventsFilterByANewerBuildsType: a type filter this build does not log is a typo (invalid)
// unless the session's log holds it, as events imported from a newer build's archive do: those are
// filtered by it (the filter refused them: listed, never filterable).
func TestEventsFilterByANewerBuildsType(t *testing.T) {
	ctx := context.Background()
	s, store, _ := testService(t, nil)
	if _, err := s.Create(ctx, CreateRequest{SessionID: "evq"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Events(ctx, "evq", carryover.EventQuery{Type: "widget_moved", Limit: 10})
	wantCode(t, err, carryover.CodeInvalid)
	if _, err := store.AppendEvent(ctx, "evq", "widget_moved", map[string]any{"to": 3}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "evq", carryover.EventQuery{Type: "widget_moved", Limit: 10})
	if err != nil || len(evs) != 1 || evs[0].EventType != "widget_moved" {
		t.Fatalf("a held type: %v %v", evs, err)
	}
	// Past its last event the page is empty, not an error.
	evs, err = s.Events(ctx, "evq", carryover.EventQuery{Type: "widget_moved", After: evs[0].SequenceNumber, Limit: 10})
	if err != nil || len(evs) != 0 {
		t.Fatalf("after the held type's last event: %v %v", evs, err)
	}
	// A known type with no events yet is an empty list.
	if evs, err := s.Events(ctx, "evq", carryover.EventQuery{Type: carryover.EventBudgetExceeded, Limit: 10}); err != nil || len(evs) != 0 {
		t.Fatalf("a known type: %v %v", evs, err)
	}
}

package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestEventTypeFilterRefusesATypo: GET .../events?event_type= with a name carryover never logs is a
// 400 naming the field and listing the names (a typo answered an empty log, as if nothing had
// happened); a real name filters.
func TestEventTypeFilterRefusesATypo(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "evq", Start: true})
	r := ts.raw("GET", "/api/sessions/evq/events?event_type=session_start", "")
	var e struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	if r.Status != 400 || e.Error.Code != "invalid_request" || e.Error.Details["field"] != "event_type" ||
		!strings.Contains(e.Error.Message, "session_started") {
		t.Fatalf("event_type=session_start: %d %s", r.Status, r.Body)
	}
	if got := ts.eventTypes("evq", 0, "session_started"); len(got) != 1 {
		t.Fatalf("event_type=session_started: %v", got)
	}
}

package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestEventsTravel: an archive with the source's events is of version 2 and gives them back as they
// were; one without them stays version 1 (readable by any version-1 reader); a damaged events
// member is refused with its reason.
func TestEventsTravel(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, "s1")
	cp := mkCheckpoint(t, src, "s1", 4)
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	evs := []carryover.Event{{SequenceNumber: 1, EventType: "session_started", Payload: json.RawMessage(`{"a":1}`), CreatedAt: at},
		{SequenceNumber: 3, EventType: "execution_completed", Payload: json.RawMessage(`null`), CreatedAt: at.Add(time.Second)}}
	eb, err := EncodeEvents(evs, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Write(context.Background(), &out, Export{Store: src, Checkpoint: cp, SessionID: "s1", Producer: "test", Events: eb}); err != nil {
		t.Fatal(err)
	}
	dst := openSQLite(t)
	_, s, err := importInto(t, dst, "s2", out.Bytes(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Index.Version != 2 || len(s.Events) != 2 || s.Events[1].EventType != "execution_completed" ||
		!s.Events[0].CreatedAt.Equal(at) || string(s.Events[0].Payload) != `{"a":1}` {
		t.Fatalf("version %d, events %+v", s.Index.Version, s.Events)
	}
	if _, s1, err := importInto(t, dst, "s3", export(t, src, "s1", cp), Limits{}); err != nil || s1.Index.Version != 1 || s1.Events != nil {
		t.Fatalf("an archive without events: %v, version %d, events %v", err, s1.Index.Version, s1.Events)
	}
	// The events member rewritten (its digest in the index fixed too) with a bad line: refused.
	for name, line := range map[string]string{"no type": `{"sequence_number":1,"event_type":"","payload":1,"created_at":"2026-01-01T00:00:00Z"}`,
		"not JSON": `{"sequence_number":1,`, "unknown field": `{"sequence_number":1,"event_type":"x","payload":1,"created_at":"2026-01-01T00:00:00Z","x":1}`} {
		ms := members(t, out.Bytes())
		var idx Index
		if err := json.Unmarshal(ms[0].b, &idx); err != nil {
			t.Fatal(err)
		}
		ms[3].b = []byte(line + "\n")
		idx.Parts[2] = part(EventsName, ms[3].b)
		ms[0].b, _ = json.Marshal(idx)
		_, err := Read(context.Background(), bytes.NewReader(pack(t, ms)), openSQLite(t), Limits{})
		var ce *carryover.Error
		if !errors.As(err, &ce) || ce.Details["reason"] != ReasonCorrupt || ce.Details["member"] != EventsName {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

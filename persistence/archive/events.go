package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/carryover/carryover"
)

// maxEventType bounds an archived event's type name.
const maxEventType = 128

// EncodeEvents is the events member of evs (a session's log, oldest first): one ArchivedEvent per
// line. It refuses a log over maxBytes (0: DefaultMaxPartBytes), which no reader would take.
func EncodeEvents(evs []carryover.Event, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxPartBytes
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	for _, ev := range evs {
		if err := enc.Encode(ArchivedEvent{SequenceNumber: ev.SequenceNumber, EventType: ev.EventType, Payload: ev.Payload,
			CreatedAt: ev.CreatedAt.UTC()}); err != nil {
			return nil, fmt.Errorf("export: event %d: %w", ev.SequenceNumber, err)
		}
		if int64(out.Len()) > maxBytes {
			return nil, carryover.Errorf(carryover.CodePayloadTooLarge,
				"the session's events are over %d bytes, the limit of an archive's part: export it without them", maxBytes)
		}
	}
	return out.Bytes(), nil
}

// parseEvents decodes and checks the events member: one event a line, each with a type (a short
// name), a JSON payload and a time, their sequence numbers rising; at most lim.MaxEvents.
func parseEvents(b []byte, lim Limits) ([]carryover.Event, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	var out []carryover.Event
	var last int64
	for sc.Scan() {
		if len(out) >= lim.MaxEvents {
			return nil, refuse(ReasonTooLarge, EventsName, "over %d events", lim.MaxEvents)
		}
		var ev ArchivedEvent
		if err := strictJSON(sc.Bytes(), &ev); err != nil {
			return nil, refuse(ReasonCorrupt, EventsName, "event %d: %v", len(out)+1, err)
		}
		if ev.EventType == "" || len(ev.EventType) > maxEventType || len(ev.Payload) == 0 || ev.CreatedAt.IsZero() {
			return nil, refuse(ReasonCorrupt, EventsName, "event %d has no type, no payload or no time", len(out)+1)
		}
		if ev.SequenceNumber <= last {
			return nil, refuse(ReasonCorrupt, EventsName, "event %d: sequence number %d after %d", len(out)+1, ev.SequenceNumber, last)
		}
		last = ev.SequenceNumber
		out = append(out, carryover.Event{SequenceNumber: ev.SequenceNumber, EventType: ev.EventType,
			Payload: append(json.RawMessage(nil), ev.Payload...), CreatedAt: ev.CreatedAt.UTC()})
	}
	if err := sc.Err(); err != nil {
		return nil, refuse(ReasonCorrupt, EventsName, "%v", err)
	}
	return out, nil
}

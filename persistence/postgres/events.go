package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/carryover/carryover"
)

// eventBody is the JSON stored for a payload: as given when it already is JSON (json.RawMessage or
// []byte), else marshalled.
func eventBody(sessionID, eventType string, payload any) ([]byte, error) {
	var body []byte
	switch p := payload.(type) {
	case json.RawMessage:
		body = p
	case []byte:
		body = p
	default:
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, fmt.Errorf("event %s of session %q: marshal payload: %w", eventType, sessionID, err)
		}
		body = b
	}
	if len(body) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("event %s of session %q: payload is not valid JSON", eventType, sessionID)
	}
	return body, nil
}

// appendEventSQL bumps the session's counter and inserts the event under the new number in one
// statement: the UPDATE's row lock makes concurrent appends of one session take turns, and a
// rolled-back append gives its number back, so numbers are 1, 2, 3... without gaps. No session row,
// no event (and no row returned); nor when the fence ($5 node, $6 epoch; NULL node: none) fails.
const appendEventSQL = `WITH s AS (
		UPDATE sessions SET event_seq = event_seq + 1 WHERE id = $1 AND ($5::text IS NULL OR (owner_node = $5 AND owner_epoch = $6))
		RETURNING event_seq
	)
	INSERT INTO events (session_id, seq, event_type, payload, created_at)
	SELECT $1, s.event_seq, $2, $3, $4 FROM s
	RETURNING seq`

// AppendEvent appends an event to session sessionID and returns it with its sequence number.
// CodeNotFound if the session does not exist.
func (s *Store) AppendEvent(ctx context.Context, sessionID, eventType string, payload any) (carryover.Event, error) {
	body, err := eventBody(sessionID, eventType, payload)
	if err != nil {
		return carryover.Event{}, err
	}
	ns := nsOf(time.Time{})
	ev := carryover.Event{SessionID: sessionID, EventType: eventType, Payload: body, CreatedAt: timeOf(ns)}
	node, epoch := s.fenceArgs(sessionID)
	rows, err := s.db.QueryContext(ctx, appendEventSQL, sessionID, eventType, string(body), ns, node, epoch)
	if err != nil {
		return carryover.Event{}, fmt.Errorf("append event to session %q: %w", sessionID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return carryover.Event{}, fmt.Errorf("append event to session %q: %w", sessionID, err)
		}
		rows.Close()
		return carryover.Event{}, s.read(ctx, func() error { return s.fenceFailed(ctx, s.db, sessionID) })
	}
	if err := rows.Scan(&ev.SequenceNumber); err != nil {
		return carryover.Event{}, fmt.Errorf("append event to session %q: %w", sessionID, err)
	}
	if err := rows.Close(); err != nil {
		return carryover.Event{}, fmt.Errorf("append event to session %q: %w", sessionID, err)
	}
	return ev, nil
}

type eventRow struct {
	carryover.Event
	CreatedAt int64 `db:"created_at"`
}

// ListEvents returns the events of a session that eq selects (carryover.EventQuery), by the
// primary key's order (session_id, seq) either way.
func (s *Store) ListEvents(ctx context.Context, sessionID string, eq carryover.EventQuery) ([]carryover.Event, error) {
	var q strings.Builder
	q.WriteString(`SELECT session_id, seq, event_type, convert_to(payload, 'UTF8') AS payload, created_at
		FROM events WHERE session_id = $1 AND seq > $2`)
	args := []any{sessionID, eq.After}
	if eq.Before > 0 {
		args = append(args, eq.Before)
		fmt.Fprintf(&q, ` AND seq < $%d`, len(args))
	}
	if eq.Type != "" {
		args = append(args, eq.Type)
		fmt.Fprintf(&q, ` AND event_type = $%d`, len(args))
	}
	q.WriteString(` ORDER BY seq`)
	if eq.Newest {
		q.WriteString(` DESC`)
	}
	if eq.Limit > 0 {
		args = append(args, eq.Limit)
		fmt.Fprintf(&q, ` LIMIT $%d`, len(args))
	}
	var rows []eventRow
	if err := s.sel(ctx, &rows, q.String(), args...); err != nil {
		return nil, fmt.Errorf("list events of session %q: %w", sessionID, err)
	}
	evs := make([]carryover.Event, len(rows))
	for i, r := range rows {
		evs[i] = r.Event
		evs[i].CreatedAt = timeOf(r.CreatedAt)
	}
	return evs, nil
}

package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// AppendEvent appends an event to session sessionID and returns it with its sequence number. The number
// is MAX(seq)+1 computed inside the insert's transaction (under the writer mutex), so concurrent
// appends neither collide nor leave gaps. payload is marshalled to JSON unless it already is JSON
// (json.RawMessage or []byte). CodeNotFound if the session does not exist.
func (s *Store) AppendEvent(ctx context.Context, sessionID, eventType string, payload any) (carryover.Event, error) {
	var body []byte
	switch p := payload.(type) {
	case json.RawMessage:
		body = p
	case []byte:
		body = p
	default:
		b, err := json.Marshal(payload)
		if err != nil {
			return carryover.Event{}, fmt.Errorf("event %s of session %q: marshal payload: %w", eventType, sessionID, err)
		}
		body = b
	}
	if len(body) == 0 {
		body = []byte("null")
	} else if !json.Valid(body) {
		return carryover.Event{}, fmt.Errorf("event %s of session %q: payload is not valid JSON", eventType, sessionID)
	}
	ev := carryover.Event{SessionID: sessionID, EventType: eventType, Payload: body, CreatedAt: dbNow()}
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		err := tx.QueryRowxContext(ctx, `INSERT INTO events (session_id, seq, event_type, payload, created_at)
			SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM events WHERE session_id = ?
			RETURNING seq`,
			sessionID, eventType, string(body), dbTime(ev.CreatedAt), sessionID).Scan(&ev.SequenceNumber)
		if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return carryover.Errorf(carryover.CodeNotFound, "session %q not found", sessionID)
		}
		if err != nil {
			return fmt.Errorf("append event to session %q: %w", sessionID, err)
		}
		return nil
	})
	if err != nil {
		return carryover.Event{}, err
	}
	return ev, nil
}

// ListEvents returns the events of a session that eq selects (carryover.EventQuery), by the
// primary key's order (session_id, seq) either way.
func (s *Store) ListEvents(ctx context.Context, sessionID string, eq carryover.EventQuery) ([]carryover.Event, error) {
	var q strings.Builder
	q.WriteString(`SELECT session_id, seq, event_type, CAST(payload AS BLOB) AS payload, created_at
		FROM events WHERE session_id = ? AND seq > ?`)
	args := []any{sessionID, eq.After}
	if eq.Before > 0 {
		q.WriteString(` AND seq < ?`)
		args = append(args, eq.Before)
	}
	if eq.Type != "" {
		q.WriteString(` AND event_type = ?`)
		args = append(args, eq.Type)
	}
	q.WriteString(` ORDER BY seq`)
	if eq.Newest {
		q.WriteString(` DESC`)
	}
	if eq.Limit > 0 {
		q.WriteString(` LIMIT ?`)
		args = append(args, eq.Limit)
	}
	evs := []carryover.Event{}
	if err := s.db.SelectContext(ctx, &evs, q.String(), args...); err != nil {
		return nil, fmt.Errorf("list events of session %q: %w", sessionID, err)
	}
	return evs, nil
}

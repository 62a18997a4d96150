package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/carryover/carryover"
)

// ImportEvents appends evs to session sessionID's log in one transaction, in their order, each with
// its type, payload and creation time as given (an imported archive's log keeps its history); their
// sequence numbers follow the session's own.
func (s *Store) ImportEvents(ctx context.Context, sessionID string, evs []carryover.Event) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		for _, ev := range evs {
			if len(ev.Payload) == 0 || !json.Valid(ev.Payload) {
				return fmt.Errorf("import events of session %q: a %s payload is not JSON", sessionID, ev.EventType)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO events (session_id, seq, event_type, payload, created_at)
				SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM events WHERE session_id = ?`,
				sessionID, ev.EventType, string(ev.Payload), dbTime(ev.CreatedAt), sessionID)
			if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
				return carryover.Errorf(carryover.CodeNotFound, "session %q not found", sessionID)
			}
			if err != nil {
				return fmt.Errorf("import events of session %q: %w", sessionID, err)
			}
		}
		return nil
	})
}

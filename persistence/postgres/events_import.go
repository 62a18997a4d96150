package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/carryover/carryover"
)

// ImportEvents appends evs to session sessionID's log in one transaction, in their order, each with
// its type, payload and creation time as given (an imported archive's log keeps its history); their
// sequence numbers follow the session's own. Fenced as AppendEvent is.
func (s *Store) ImportEvents(ctx context.Context, sessionID string, evs []carryover.Event) error {
	node, epoch := s.fenceArgs(sessionID)
	return s.tx(ctx, func(tx *sqlx.Tx) error {
		for _, ev := range evs {
			if len(ev.Payload) == 0 || !json.Valid(ev.Payload) {
				return fmt.Errorf("import events of session %q: a %s payload is not JSON", sessionID, ev.EventType)
			}
			res, err := tx.ExecContext(ctx, appendEventSQL, sessionID, ev.EventType, string(ev.Payload), nsOf(ev.CreatedAt), node, epoch)
			if err != nil {
				return fmt.Errorf("import events of session %q: %w", sessionID, err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return s.fenceFailed(ctx, tx, sessionID)
			}
		}
		return nil
	})
}

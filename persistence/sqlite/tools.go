package sqlite

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// PutTool inserts t or replaces the tool of the same name in the session; a replaced tool keeps its
// original created_at so that listings stay in registration order. CodeNotFound if the session does
// not exist.
func (s *Store) PutTool(ctx context.Context, t carryover.Tool) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tools (session_id, name, tool_type, description, input_schema, created_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (session_id, name) DO UPDATE SET
				tool_type = excluded.tool_type, description = excluded.description, input_schema = excluded.input_schema`,
			t.SessionID, t.Name, t.ToolType, t.Description, jsonText(t.InputSchema, "{}"), dbTime(t.CreatedAt))
		if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return carryover.Errorf(carryover.CodeNotFound, "session %q not found", t.SessionID)
		}
		if err != nil {
			return fmt.Errorf("put tool %q of session %q: %w", t.Name, t.SessionID, err)
		}
		return nil
	})
}

// ListTools returns the tools of a session in registration order.
func (s *Store) ListTools(ctx context.Context, sessionID string) ([]carryover.Tool, error) {
	out := []carryover.Tool{}
	err := s.db.SelectContext(ctx, &out, `SELECT session_id, name, tool_type, description,
			CAST(input_schema AS BLOB) AS input_schema, created_at
		FROM tools WHERE session_id = ? ORDER BY created_at, name`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list tools of session %q: %w", sessionID, err)
	}
	return out, nil
}

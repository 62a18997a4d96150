package postgres

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

// InsertExecution records e (its ID is ignored) and returns the new id; CodeNotFound if the session
// does not exist. A zero StartedAt means now.
func (s *Store) InsertExecution(ctx context.Context, e carryover.Execution) (int64, error) {
	var id int64
	err := s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := s.lockFenced(ctx, tx, e.SessionID); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `INSERT INTO executions
			(session_id, execution_count, kind, code, status, result, started_at, duration_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
			e.SessionID, e.ExecutionCount, e.Kind, e.Code, e.Status, jsonText(e.Result, "null"), nsOf(e.StartedAt), e.DurationMS).Scan(&id)
		if err != nil {
			return fmt.Errorf("insert execution of session %q: %w", e.SessionID, err)
		}
		return nil
	})
	return id, err
}

type executionRow struct {
	carryover.Execution
	StartedAt int64 `db:"started_at"`
}

// ListExecutions returns the last limit executions of a session (limit <= 0: all), oldest first.
func (s *Store) ListExecutions(ctx context.Context, sessionID string, limit int) ([]carryover.Execution, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	var rows []executionRow
	err := s.sel(ctx, &rows, `SELECT * FROM (
			SELECT id, session_id, execution_count, kind, code, status, convert_to(result, 'UTF8') AS result,
				started_at, duration_ms
			FROM executions WHERE session_id = $1 ORDER BY id DESC LIMIT $2
		) e ORDER BY id`, sessionID, lim)
	if err != nil {
		return nil, fmt.Errorf("list executions of session %q: %w", sessionID, err)
	}
	out := make([]carryover.Execution, len(rows))
	for i, r := range rows {
		out[i] = r.Execution
		out[i].StartedAt = timeOf(r.StartedAt)
	}
	return out, nil
}

// PutTool inserts t or replaces the tool of the same name in the session; a replaced tool keeps its
// original created_at so that listings stay in registration order. CodeNotFound if the session does
// not exist.
func (s *Store) PutTool(ctx context.Context, t carryover.Tool) error {
	return s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := s.lockFenced(ctx, tx, t.SessionID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tools (session_id, name, tool_type, description, input_schema, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (session_id, name) DO UPDATE SET
				tool_type = excluded.tool_type, description = excluded.description, input_schema = excluded.input_schema`,
			t.SessionID, t.Name, t.ToolType, t.Description, jsonText(t.InputSchema, "{}"), nsOf(t.CreatedAt))
		if err != nil {
			return fmt.Errorf("put tool %q of session %q: %w", t.Name, t.SessionID, err)
		}
		return nil
	})
}

type toolRow struct {
	carryover.Tool
	CreatedAt int64 `db:"created_at"`
}

// ListTools returns the tools of a session in registration order.
func (s *Store) ListTools(ctx context.Context, sessionID string) ([]carryover.Tool, error) {
	var rows []toolRow
	err := s.sel(ctx, &rows, `SELECT session_id, name, tool_type, description,
			convert_to(input_schema, 'UTF8') AS input_schema, created_at
		FROM tools WHERE session_id = $1 ORDER BY created_at, name`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list tools of session %q: %w", sessionID, err)
	}
	out := make([]carryover.Tool, len(rows))
	for i, r := range rows {
		out[i] = r.Tool
		out[i].CreatedAt = timeOf(r.CreatedAt)
	}
	return out, nil
}

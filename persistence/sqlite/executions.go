package sqlite

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// InsertExecution records e (its ID is ignored) and returns the new row id; CodeNotFound if the session
// does not exist. A zero StartedAt means now.
func (s *Store) InsertExecution(ctx context.Context, e carryover.Execution) (int64, error) {
	var id int64
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO executions
			(session_id, execution_count, kind, code, status, result, started_at, duration_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			e.SessionID, e.ExecutionCount, e.Kind, e.Code, e.Status, jsonText(e.Result, "null"), dbTime(e.StartedAt), e.DurationMS)
		if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return carryover.Errorf(carryover.CodeNotFound, "session %q not found", e.SessionID)
		}
		if err != nil {
			return fmt.Errorf("insert execution of session %q: %w", e.SessionID, err)
		}
		id, err = res.LastInsertId()
		return err
	})
	return id, err
}

// ListExecutions returns the last limit executions of a session (limit <= 0: all), oldest first.
func (s *Store) ListExecutions(ctx context.Context, sessionID string, limit int) ([]carryover.Execution, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	out := []carryover.Execution{}
	err := s.db.SelectContext(ctx, &out, `SELECT * FROM (
			SELECT id, session_id, execution_count, kind, code, status, CAST(result AS BLOB) AS result,
				started_at, duration_ms
			FROM executions WHERE session_id = ? ORDER BY id DESC LIMIT ?
		) ORDER BY id`, sessionID, limit)
	if err != nil {
		return nil, fmt.Errorf("list executions of session %q: %w", sessionID, err)
	}
	return out, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// sessionCols reads doc as a BLOB: database/sql cannot scan TEXT into a json.RawMessage.
const sessionCols = `id, client_id, state, CAST(doc AS BLOB) AS doc, created_at, updated_at`

// CreateSession inserts r; CodeConflict if the id is taken. Zero times mean now; a zero UpdatedAt
// takes CreatedAt.
func (s *Store) CreateSession(ctx context.Context, r carryover.SessionRecord) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = dbNow()
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, client_id, state, doc, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?)`,
			r.ID, r.ClientID, r.State, jsonText(r.Doc, "{}"), dbTime(r.CreatedAt), dbTime(r.UpdatedAt))
		if isConstraint(err, sqlite3.ErrConstraintPrimaryKey) {
			return carryover.Errorf(carryover.CodeConflict, "session %q already exists", r.ID)
		}
		if err != nil {
			return fmt.Errorf("create session %q: %w", r.ID, err)
		}
		return nil
	})
}

// UpdateSession replaces the client id, state and document of session r.ID (created_at is kept);
// CodeNotFound if it does not exist. A zero UpdatedAt means now.
func (s *Store) UpdateSession(ctx context.Context, r carryover.SessionRecord) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET client_id = ?, state = ?, doc = ?, updated_at = ? WHERE id = ?`,
			r.ClientID, r.State, jsonText(r.Doc, "{}"), dbTime(r.UpdatedAt), r.ID)
		if err != nil {
			return fmt.Errorf("update session %q: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return carryover.Errorf(carryover.CodeNotFound, "session %q not found", r.ID)
		}
		return nil
	})
}

// GetSession returns session id; CodeNotFound if it does not exist.
func (s *Store) GetSession(ctx context.Context, id string) (carryover.SessionRecord, error) {
	var r carryover.SessionRecord
	err := s.db.GetContext(ctx, &r, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return r, carryover.Errorf(carryover.CodeNotFound, "session %q not found", id)
	}
	if err != nil {
		return r, fmt.Errorf("get session %q: %w", id, err)
	}
	return r, nil
}

// ListSessions returns every session, oldest first (the order they were created in).
func (s *Store) ListSessions(ctx context.Context) ([]carryover.SessionRecord, error) {
	rows := []carryover.SessionRecord{}
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+sessionCols+` FROM sessions ORDER BY created_at, rowid`); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return rows, nil
}

// SessionByClientID returns the most recently updated session with that client id; CodeNotFound when
// none (always for "", which means "no client id").
func (s *Store) SessionByClientID(ctx context.Context, clientID string) (carryover.SessionRecord, error) {
	var r carryover.SessionRecord
	if clientID == "" {
		return r, carryover.Errorf(carryover.CodeNotFound, "no session with an empty client id")
	}
	err := s.db.GetContext(ctx, &r, `SELECT `+sessionCols+` FROM sessions WHERE client_id = ?
		ORDER BY updated_at DESC, rowid DESC LIMIT 1`, clientID)
	if errors.Is(err, sql.ErrNoRows) {
		return r, carryover.Errorf(carryover.CodeNotFound, "no session with client id %q", clientID)
	}
	if err != nil {
		return r, fmt.Errorf("get session by client id %q: %w", clientID, err)
	}
	return r, nil
}

// DeleteSession deletes session id with its events, executions, tools and checkpoints (foreign-key
// cascades); its chunks stay until the next GC. CodeNotFound if it does not exist.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete session %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return carryover.Errorf(carryover.CodeNotFound, "session %q not found", id)
		}
		return nil
	})
}

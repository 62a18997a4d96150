package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

// sessionRow is a sessions row as scanned: its times are nanoseconds (the shallower fields win over
// the embedded record's under sqlx).
type sessionRow struct {
	carryover.SessionRecord
	CreatedAt int64 `db:"created_at"`
	UpdatedAt int64 `db:"updated_at"`
}

func (r sessionRow) record() carryover.SessionRecord {
	out := r.SessionRecord
	out.CreatedAt, out.UpdatedAt = timeOf(r.CreatedAt), timeOf(r.UpdatedAt)
	return out
}

// doc is scanned as bytes: database/sql cannot scan TEXT into a json.RawMessage otherwise.
const sessionCols = `id, client_id, state, convert_to(doc, 'UTF8') AS doc, created_at, updated_at`

// CreateSession inserts r; CodeConflict if the id is taken. Zero times mean now; a zero UpdatedAt
// takes CreatedAt.
func (s *Store) CreateSession(ctx context.Context, r carryover.SessionRecord) error {
	created := nsOf(r.CreatedAt)
	updated := created
	if !r.UpdatedAt.IsZero() {
		updated = nsOf(r.UpdatedAt)
	}
	// The node that creates a session owns it, at epoch 1.
	var owner any
	var epoch int64
	if s.clustered() {
		owner, epoch = s.opts.Node.ID, 1
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (id, client_id, state, doc, created_at, updated_at, owner_node, owner_epoch)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, r.ID, r.ClientID, r.State, jsonText(r.Doc, "{}"), created, updated, owner, epoch)
	if isCode(err, uniqueViolation) {
		return carryover.Errorf(carryover.CodeConflict, "session %q already exists", r.ID)
	}
	if err != nil {
		return fmt.Errorf("create session %q: %w", r.ID, err)
	}
	if s.clustered() {
		s.held.set(r.ID, epoch)
	}
	return nil
}

// UpdateSession replaces the client id, state and document of session r.ID (created_at is kept);
// CodeNotFound if it does not exist, CodeNotOwner if this node does not own it. A zero UpdatedAt means now.
func (s *Store) UpdateSession(ctx context.Context, r carryover.SessionRecord) error {
	node, epoch := s.fenceArgs(r.ID)
	// The same values however often it runs: a lost connection's statement runs again (execSame).
	n, err := s.execSame(ctx, `UPDATE sessions SET client_id = $1, state = $2, doc = $3, updated_at = $4
		WHERE id = $5 AND `+fenceSQL(6), r.ClientID, r.State, jsonText(r.Doc, "{}"), nsOf(r.UpdatedAt), r.ID, node, epoch)
	if err != nil {
		return fmt.Errorf("update session %q: %w", r.ID, err)
	}
	if n == 0 {
		return s.read(ctx, func() error { return s.fenceFailed(ctx, s.db, r.ID) })
	}
	return nil
}

// GetSession returns session id; CodeNotFound if it does not exist.
func (s *Store) GetSession(ctx context.Context, id string) (carryover.SessionRecord, error) {
	var r sessionRow
	err := s.get(ctx, &r, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.SessionRecord{}, carryover.Errorf(carryover.CodeNotFound, "session %q not found", id)
	}
	if err != nil {
		return carryover.SessionRecord{}, fmt.Errorf("get session %q: %w", id, err)
	}
	return r.record(), nil
}

// ListSessions returns every session, oldest first (the order they were created in).
func (s *Store) ListSessions(ctx context.Context) ([]carryover.SessionRecord, error) {
	var rows []sessionRow
	if err := s.sel(ctx, &rows, `SELECT `+sessionCols+` FROM sessions ORDER BY created_at, pos`); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]carryover.SessionRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// DeleteSession deletes session id with its events, executions, tools and checkpoints (foreign-key
// cascades); its chunks stay until the next GC. CodeNotFound if it does not exist.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sqlx.Tx) error {
		node, epoch := s.fenceArgs(id)
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = $1 AND `+fenceSQL(2), id, node, epoch)
		if err != nil {
			return fmt.Errorf("delete session %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return s.fenceFailed(ctx, tx, id)
		}
		s.held.drop(id)
		return nil
	})
}

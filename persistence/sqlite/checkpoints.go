package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

const checkpointCols = `id, session_id, turn, parent_id, CAST(manifest AS BLOB) AS manifest, bytes, created_at`

// commitCheckpoint records cp and its roots in one transaction (CheckpointWriter.Commit). Every root
// must already be stored (an error wrapping carryover.ErrMissingChunk otherwise, and nothing is
// recorded); duplicate roots are recorded once. CodeConflict if the id is taken, CodeNotFound if the
// session does not exist. A zero CreatedAt means now.
func (s *Store) commitCheckpoint(ctx context.Context, cp carryover.Checkpoint) error {
	if cp.ID == "" {
		return fmt.Errorf("commit checkpoint: empty id")
	}
	return s.writeTx(ctx, func(tx *sqlx.Tx) error { return insertCheckpoint(ctx, tx, cp) })
}

// commitPruning is commitCheckpoint and then Prune(cp.SessionID, keep), in one transaction.
func (s *Store) commitPruning(ctx context.Context, cp carryover.Checkpoint, keep int) (pruned int, err error) {
	if cp.ID == "" {
		return 0, fmt.Errorf("commit checkpoint: empty id")
	}
	err = s.writeTx(ctx, func(tx *sqlx.Tx) error {
		if err := insertCheckpoint(ctx, tx, cp); err != nil {
			return err
		}
		pruned, err = pruneTx(ctx, tx, cp.SessionID, keep)
		return err
	})
	return pruned, err
}

// insertCheckpoint records cp and its roots in tx (see commitCheckpoint). The roots are checked and
// inserted by one statement each over a JSON array of them (json_each), not one per root: a turn's
// checkpoint has tens of roots, and a statement per root was a third of the commit's CPU.
func insertCheckpoint(ctx context.Context, tx *sqlx.Tx, cp carryover.Checkpoint) error {
	roots, err := json.Marshal(dedupe(cp.Roots))
	if err != nil {
		return fmt.Errorf("commit checkpoint %s: %w", cp.ID, err)
	}
	var missing string
	err = tx.QueryRowxContext(ctx, `SELECT r.value FROM json_each(?) AS r
		WHERE NOT EXISTS (SELECT 1 FROM chunks WHERE hash = r.value) ORDER BY r.key LIMIT 1`, string(roots)).Scan(&missing)
	switch {
	case err == nil:
		return fmt.Errorf("commit checkpoint %s: root %s: %w", cp.ID, missing, carryover.ErrMissingChunk)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("commit checkpoint %s: %w", cp.ID, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO checkpoints (id, session_id, turn, parent_id, manifest, bytes, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		cp.ID, cp.SessionID, cp.Turn, cp.ParentID, jsonText(cp.Manifest, "{}"), cp.Bytes, dbTime(cp.CreatedAt))
	switch {
	case isConstraint(err, sqlite3.ErrConstraintPrimaryKey):
		return carryover.Errorf(carryover.CodeConflict, "checkpoint %q already exists", cp.ID)
	case isConstraint(err, sqlite3.ErrConstraintForeignKey):
		return carryover.Errorf(carryover.CodeNotFound, "session %q not found", cp.SessionID)
	case err != nil:
		return fmt.Errorf("commit checkpoint %s: %w", cp.ID, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoint_roots (checkpoint_id, pos, hash)
		SELECT ?, r.key, r.value FROM json_each(?) AS r`, cp.ID, string(roots)); err != nil {
		return fmt.Errorf("commit checkpoint %s: roots: %w", cp.ID, err)
	}
	return nil
}

// dedupe returns hs without repeats, first occurrence kept.
func dedupe(hs []string) []string {
	seen := make(map[string]bool, len(hs))
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// GetCheckpoint returns checkpoint id of the session with its roots; CodeNotFound if there is none.
func (s *Store) GetCheckpoint(ctx context.Context, sessionID, id string) (carryover.Checkpoint, error) {
	return s.oneCheckpoint(ctx, fmt.Sprintf("checkpoint %s of session %q", id, sessionID),
		`SELECT `+checkpointCols+` FROM checkpoints WHERE session_id = ? AND id = ?`, sessionID, id)
}

// LatestCheckpoint returns the session's most recently committed checkpoint; CodeNotFound when none.
func (s *Store) LatestCheckpoint(ctx context.Context, sessionID string) (carryover.Checkpoint, error) {
	return s.oneCheckpoint(ctx, fmt.Sprintf("latest checkpoint of session %q", sessionID),
		`SELECT `+checkpointCols+` FROM checkpoints WHERE session_id = ? ORDER BY rowid DESC LIMIT 1`, sessionID)
}

// LatestCheckpointID is the id of the session's newest checkpoint, "" when none
// (carryover.CheckpointHeads): LatestCheckpoint's row without its manifest and roots.
func (s *Store) LatestCheckpointID(ctx context.Context, sessionID string) (string, error) {
	var id string
	err := s.db.GetContext(ctx, &id, `SELECT id FROM checkpoints WHERE session_id = ? ORDER BY rowid DESC LIMIT 1`, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("latest checkpoint of session %q: %w", sessionID, err)
	}
	return id, nil
}

func (s *Store) oneCheckpoint(ctx context.Context, what, q string, args ...any) (carryover.Checkpoint, error) {
	var cp carryover.Checkpoint
	err := s.db.GetContext(ctx, &cp, q, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return cp, carryover.Errorf(carryover.CodeNotFound, "%s not found", what)
	}
	if err != nil {
		return cp, fmt.Errorf("%s: %w", what, err)
	}
	cp.Roots = []string{}
	if err := s.db.SelectContext(ctx, &cp.Roots, `SELECT hash FROM checkpoint_roots WHERE checkpoint_id = ? ORDER BY pos`, cp.ID); err != nil {
		return cp, fmt.Errorf("%s: roots: %w", what, err)
	}
	return cp, nil
}

// ListCheckpoints returns the session's checkpoints with their roots, newest first.
func (s *Store) ListCheckpoints(ctx context.Context, sessionID string) ([]carryover.Checkpoint, error) {
	cps := []carryover.Checkpoint{}
	if err := s.db.SelectContext(ctx, &cps, `SELECT `+checkpointCols+` FROM checkpoints WHERE session_id = ?
		ORDER BY rowid DESC`, sessionID); err != nil {
		return nil, fmt.Errorf("list checkpoints of session %q: %w", sessionID, err)
	}
	var roots []struct {
		ID   string `db:"checkpoint_id"`
		Hash string `db:"hash"`
	}
	if err := s.db.SelectContext(ctx, &roots, `SELECT r.checkpoint_id, r.hash FROM checkpoint_roots r
		JOIN checkpoints c ON c.id = r.checkpoint_id WHERE c.session_id = ? ORDER BY r.checkpoint_id, r.pos`, sessionID); err != nil {
		return nil, fmt.Errorf("list checkpoint roots of session %q: %w", sessionID, err)
	}
	byID := make(map[string][]string, len(cps))
	for _, r := range roots {
		byID[r.ID] = append(byID[r.ID], r.Hash)
	}
	for i := range cps {
		cps[i].Roots = byID[cps[i].ID]
		if cps[i].Roots == nil {
			cps[i].Roots = []string{}
		}
	}
	return cps, nil
}

// Prune keeps the session's newest keep checkpoints and deletes the others with their roots; the latest
// is always kept (keep < 1 counts as 1). The chunks only they reached are freed by the next GC.
func (s *Store) Prune(ctx context.Context, sessionID string, keep int) (deleted int, err error) {
	err = s.writeTx(ctx, func(tx *sqlx.Tx) error {
		deleted, err = pruneTx(ctx, tx, sessionID, keep)
		return err
	})
	return deleted, err
}

// pruneTx is Prune in tx.
func pruneTx(ctx context.Context, tx *sqlx.Tx, sessionID string, keep int) (int, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE session_id = ? AND rowid NOT IN (
		SELECT rowid FROM checkpoints WHERE session_id = ? ORDER BY rowid DESC LIMIT ?)`, sessionID, sessionID, max(keep, 1))
	if err != nil {
		return 0, fmt.Errorf("prune checkpoints of session %q: %w", sessionID, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

const checkpointCols = `id, session_id, turn, parent_id, convert_to(manifest, 'UTF8') AS manifest, bytes, created_at`

type checkpointRow struct {
	carryover.Checkpoint
	CreatedAt int64 `db:"created_at"`
}

func (r checkpointRow) checkpoint() carryover.Checkpoint {
	cp := r.Checkpoint
	cp.CreatedAt = timeOf(r.CreatedAt)
	return cp
}

// commitCheckpoint records cp and its roots in one transaction. It locks the session row first (so
// commits of one session are numbered in commit order), then checks every root is stored under the
// shared GC lock (an error wrapping carryover.ErrMissingChunk otherwise, and nothing is recorded).
// CodeConflict if the id is taken, CodeNotFound if the session does not exist.
func (s *Store) commitCheckpoint(ctx context.Context, cp carryover.Checkpoint) error {
	if cp.ID == "" {
		return fmt.Errorf("commit checkpoint: empty id")
	}
	roots := dedupe(cp.Roots)
	return s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := shareGCLock(ctx, tx); err != nil {
			return err
		}
		var one int
		node, epoch := s.fenceArgs(cp.SessionID)
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND `+fenceSQL(2)+` FOR UPDATE`,
			cp.SessionID, node, epoch).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return s.fenceFailed(ctx, tx, cp.SessionID)
		} else if err != nil {
			return fmt.Errorf("commit checkpoint %s: %w", cp.ID, err)
		}
		missing, err := missingIn(ctx, tx, roots)
		if err != nil {
			return fmt.Errorf("commit checkpoint %s: %w", cp.ID, err)
		}
		if len(missing) > 0 {
			return fmt.Errorf("commit checkpoint %s: root %s: %w", cp.ID, missing[0], carryover.ErrMissingChunk)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO checkpoints (id, session_id, turn, parent_id, manifest, bytes, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			cp.ID, cp.SessionID, cp.Turn, cp.ParentID, jsonText(cp.Manifest, "{}"), cp.Bytes, nsOf(cp.CreatedAt))
		if isCode(err, uniqueViolation) {
			return carryover.Errorf(carryover.CodeConflict, "checkpoint %q already exists", cp.ID)
		} else if err != nil {
			return fmt.Errorf("commit checkpoint %s: %w", cp.ID, err)
		}
		if len(roots) > 0 {
			_, err = tx.ExecContext(ctx, `INSERT INTO checkpoint_roots (checkpoint_id, pos, hash)
				SELECT $1, r.ord - 1, r.hash FROM unnest($2::text[]) WITH ORDINALITY AS r(hash, ord)`, cp.ID, roots)
			if err != nil {
				return fmt.Errorf("commit checkpoint %s: roots: %w", cp.ID, err)
			}
		}
		return nil
	})
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
		`SELECT `+checkpointCols+` FROM checkpoints WHERE session_id = $1 AND id = $2`, sessionID, id)
}

// LatestCheckpoint returns the session's most recently committed checkpoint; CodeNotFound when none.
func (s *Store) LatestCheckpoint(ctx context.Context, sessionID string) (carryover.Checkpoint, error) {
	return s.oneCheckpoint(ctx, fmt.Sprintf("latest checkpoint of session %q", sessionID),
		`SELECT `+checkpointCols+` FROM checkpoints WHERE session_id = $1 ORDER BY pos DESC LIMIT 1`, sessionID)
}

// LatestCheckpointID is the id of the session's newest checkpoint, "" when none
// (carryover.CheckpointHeads): LatestCheckpoint's row without its manifest and roots.
func (s *Store) LatestCheckpointID(ctx context.Context, sessionID string) (string, error) {
	var id string
	err := s.db.GetContext(ctx, &id, `SELECT id FROM checkpoints WHERE session_id = $1 ORDER BY pos DESC LIMIT 1`, sessionID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("latest checkpoint of session %q: %w", sessionID, err)
	}
	return id, nil
}

func (s *Store) oneCheckpoint(ctx context.Context, what, q string, args ...any) (carryover.Checkpoint, error) {
	var r checkpointRow
	err := s.get(ctx, &r, q, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.Checkpoint{}, carryover.Errorf(carryover.CodeNotFound, "%s not found", what)
	}
	if err != nil {
		return carryover.Checkpoint{}, fmt.Errorf("%s: %w", what, err)
	}
	cp := r.checkpoint()
	cp.Roots = []string{}
	if err := s.sel(ctx, &cp.Roots, `SELECT hash FROM checkpoint_roots WHERE checkpoint_id = $1 ORDER BY pos`, cp.ID); err != nil {
		return cp, fmt.Errorf("%s: roots: %w", what, err)
	}
	return cp, nil
}

// ListCheckpoints returns the session's checkpoints with their roots, newest first.
func (s *Store) ListCheckpoints(ctx context.Context, sessionID string) ([]carryover.Checkpoint, error) {
	var rows []checkpointRow
	if err := s.sel(ctx, &rows, `SELECT `+checkpointCols+` FROM checkpoints WHERE session_id = $1
		ORDER BY pos DESC`, sessionID); err != nil {
		return nil, fmt.Errorf("list checkpoints of session %q: %w", sessionID, err)
	}
	var roots []struct {
		ID   string `db:"checkpoint_id"`
		Hash string `db:"hash"`
	}
	if err := s.sel(ctx, &roots, `SELECT r.checkpoint_id, r.hash FROM checkpoint_roots r
		JOIN checkpoints c ON c.id = r.checkpoint_id WHERE c.session_id = $1 ORDER BY r.checkpoint_id, r.pos`, sessionID); err != nil {
		return nil, fmt.Errorf("list checkpoint roots of session %q: %w", sessionID, err)
	}
	byID := make(map[string][]string, len(rows))
	for _, r := range roots {
		byID[r.ID] = append(byID[r.ID], r.Hash)
	}
	cps := make([]carryover.Checkpoint, len(rows))
	for i, r := range rows {
		cps[i] = r.checkpoint()
		cps[i].Roots = byID[cps[i].ID]
		if cps[i].Roots == nil {
			cps[i].Roots = []string{}
		}
	}
	return cps, nil
}

// Prune keeps the session's newest keep checkpoints and deletes the others with their roots; the
// latest is always kept (keep < 1 counts as 1).
func (s *Store) Prune(ctx context.Context, sessionID string, keep int) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx *sqlx.Tx) error {
		if err := s.lockFenced(ctx, tx, sessionID); err != nil {
			if errors.Is(err, carryover.ErrNotFound) {
				return nil // nothing to prune
			}
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE session_id = $1 AND pos NOT IN (
			SELECT pos FROM checkpoints WHERE session_id = $1 ORDER BY pos DESC LIMIT $2)`, sessionID, max(keep, 1))
		if err != nil {
			return fmt.Errorf("prune checkpoints of session %q: %w", sessionID, err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}

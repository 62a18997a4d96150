package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

// ListSkills returns the tenant's skill files by path.
func (s *Store) ListSkills(ctx context.Context, tenant string) ([]carryover.SkillFile, error) {
	out := []carryover.SkillFile{}
	err := s.db.SelectContext(ctx, &out, `SELECT tenant, path, size, hash, updated_at
		FROM skills WHERE tenant = ? ORDER BY path`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list skills of tenant %q: %w", tenant, err)
	}
	return out, nil
}

type skillRow struct {
	carryover.SkillFile
	Content []byte `db:"content"`
}

// GetSkill returns one skill file and its content; CodeNotFound if there is none.
func (s *Store) GetSkill(ctx context.Context, tenant, path string) (carryover.SkillFile, []byte, error) {
	var r skillRow
	err := s.db.GetContext(ctx, &r, `SELECT tenant, path, size, hash, updated_at, content
		FROM skills WHERE tenant = ? AND path = ?`, tenant, path)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.SkillFile{}, nil, carryover.Errorf(carryover.CodeNotFound, "skill %q not found", path).WithDetails("path", path)
	}
	if err != nil {
		return carryover.SkillFile{}, nil, fmt.Errorf("get skill %q of tenant %q: %w", path, tenant, err)
	}
	if r.Content == nil {
		r.Content = []byte{}
	}
	return r.SkillFile, r.Content, nil
}

// PutSkill creates or replaces a skill file.
func (s *Store) PutSkill(ctx context.Context, tenant, path string, content []byte) (carryover.SkillFile, error) {
	f := carryover.SkillFile{Tenant: tenant, Path: path, Size: int64(len(content)), Hash: carryover.SkillHash(content), UpdatedAt: dbNow()}
	if content == nil {
		content = []byte{}
	}
	err := s.writeTx(ctx, func(tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO skills (tenant, path, size, hash, content, updated_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, path) DO UPDATE SET size = excluded.size, hash = excluded.hash,
				content = excluded.content, updated_at = excluded.updated_at`,
			tenant, path, f.Size, f.Hash, content, dbTime(f.UpdatedAt))
		if err != nil {
			return fmt.Errorf("put skill %q of tenant %q: %w", path, tenant, err)
		}
		return nil
	})
	return f, err
}

// DeleteSkill removes a skill file; CodeNotFound if there is none.
func (s *Store) DeleteSkill(ctx context.Context, tenant, path string) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM skills WHERE tenant = ? AND path = ?`, tenant, path)
		if err != nil {
			return fmt.Errorf("delete skill %q of tenant %q: %w", path, tenant, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return carryover.Errorf(carryover.CodeNotFound, "skill %q not found", path).WithDetails("path", path)
		}
		return nil
	})
}

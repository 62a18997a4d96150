package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
)

// Skills are tenant-wide, not a session's: their writes are not fenced by session ownership, and the
// last PUT of a path wins.

type skillRow struct {
	carryover.SkillFile
	UpdatedAt int64  `db:"updated_at"`
	Content   []byte `db:"content"`
}

func (r skillRow) file() carryover.SkillFile {
	f := r.SkillFile
	f.UpdatedAt = timeOf(r.UpdatedAt)
	return f
}

// ListSkills returns the tenant's skill files by path.
func (s *Store) ListSkills(ctx context.Context, tenant string) ([]carryover.SkillFile, error) {
	var rows []skillRow
	err := s.sel(ctx, &rows, `SELECT tenant, path, size, hash, updated_at
		FROM skills WHERE tenant = $1 ORDER BY path COLLATE "C"`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list skills of tenant %q: %w", tenant, err)
	}
	out := make([]carryover.SkillFile, len(rows))
	for i, r := range rows {
		out[i] = r.file()
	}
	return out, nil
}

// GetSkill returns one skill file and its content; CodeNotFound if there is none.
func (s *Store) GetSkill(ctx context.Context, tenant, path string) (carryover.SkillFile, []byte, error) {
	var r skillRow
	err := s.get(ctx, &r, `SELECT tenant, path, size, hash, updated_at, content
		FROM skills WHERE tenant = $1 AND path = $2`, tenant, path)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.SkillFile{}, nil, carryover.Errorf(carryover.CodeNotFound, "skill %q not found", path).WithDetails("path", path)
	}
	if err != nil {
		return carryover.SkillFile{}, nil, fmt.Errorf("get skill %q of tenant %q: %w", path, tenant, err)
	}
	if r.Content == nil {
		r.Content = []byte{}
	}
	return r.file(), r.Content, nil
}

// PutSkill creates or replaces a skill file.
func (s *Store) PutSkill(ctx context.Context, tenant, path string, content []byte) (carryover.SkillFile, error) {
	ns := nsOf(time.Time{})
	f := carryover.SkillFile{Tenant: tenant, Path: path, Size: int64(len(content)), Hash: carryover.SkillHash(content), UpdatedAt: timeOf(ns)}
	if content == nil {
		content = []byte{}
	}
	_, err := s.execSame(ctx, `INSERT INTO skills (tenant, path, size, hash, content, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (tenant, path) DO UPDATE SET size = excluded.size, hash = excluded.hash,
			content = excluded.content, updated_at = excluded.updated_at`,
		tenant, path, f.Size, f.Hash, content, ns)
	if err != nil {
		return carryover.SkillFile{}, fmt.Errorf("put skill %q of tenant %q: %w", path, tenant, err)
	}
	return f, nil
}

// DeleteSkill removes a skill file; CodeNotFound if there is none.
func (s *Store) DeleteSkill(ctx context.Context, tenant, path string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM skills WHERE tenant = $1 AND path = $2`, tenant, path)
	if err != nil {
		return fmt.Errorf("delete skill %q of tenant %q: %w", path, tenant, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return carryover.Errorf(carryover.CodeNotFound, "skill %q not found", path).WithDetails("path", path)
	}
	return nil
}

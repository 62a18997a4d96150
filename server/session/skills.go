package session

// skills.go: a tenant's skills are a folder of files (helper modules, scripts, small data) every
// session of the tenant sees at /skills (on sys.path), managed over the API. They are kept in the
// store (carryover.SkillStore), so every node of a cluster sees the same skills and a lost data dir
// loses none; each node materialises them into a cache folder (skills_cache.go) that the sandbox
// bind-mounts. A session reads them; it writes them only when created with sandbox.skills "rw", so
// one agent's mistake cannot silently change every other session's helpers: its writes land in the
// cache and go to the store at the end of each of its turns. Other tenants never see them: each
// tenant's folder is its own mount.

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// Skills modes of a session (carryover.Sandbox.Skills).
const (
	SkillsReadOnly  = "ro"
	SkillsReadWrite = "rw"
)

// skillPath checks an API path of a skill file ("helpers/x.py"; "/skills/..." accepted).
func skillPath(p string) (string, error) {
	if p == "/skills" || len(p) > 8 && p[:8] == "/skills/" {
		p = p[len("/skills"):]
	}
	if len(p) > 0 && p[0] == '/' {
		return "", carryover.Errorf(carryover.CodeInvalid, "path %q is outside /skills", p).WithDetails("path", p)
	}
	rel, err := workspacePath(p)
	if err == nil && rel == "" {
		err = carryover.Errorf(carryover.CodeInvalid, "a file path is required")
	}
	return rel, err
}

// ListSkills lists the tenant's skill files (from the store).
func (s *Service) ListSkills(ctx context.Context) ([]FileInfo, error) {
	files, err := s.store.ListSkills(ctx, carryover.TenantFromContext(ctx))
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, len(files))
	for i, f := range files {
		out[i] = FileInfo{Path: f.Path, Size: f.Size, ModifiedAt: f.UpdatedAt}
	}
	return out, nil
}

// ReadSkill returns one of the tenant's skill files and its content (from the store).
func (s *Service) ReadSkill(ctx context.Context, p string) (FileInfo, []byte, error) {
	rel, err := skillPath(p)
	if err != nil {
		return FileInfo{}, nil, err
	}
	f, b, err := s.store.GetSkill(ctx, carryover.TenantFromContext(ctx), rel)
	if err != nil {
		return FileInfo{}, nil, err
	}
	return FileInfo{Path: f.Path, Size: f.Size, ModifiedAt: f.UpdatedAt}, b, nil
}

// WriteSkill writes a skill file: to the store first, then to this node's cache (atomically: a
// session importing it meanwhile sees the old or the new file, never half of one). A path that is a
// file's folder, or runs through a file, is refused: the folder could not hold both.
func (s *Service) WriteSkill(ctx context.Context, p string, r io.Reader) (FileInfo, error) {
	rel, err := skillPath(p)
	if err != nil {
		return FileInfo{}, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return FileInfo{}, err
	}
	tenant := carryover.TenantFromContext(ctx)
	files, err := s.store.ListSkills(ctx, tenant)
	if err != nil {
		return FileInfo{}, err
	}
	for _, f := range files {
		if strings.HasPrefix(f.Path, rel+"/") || strings.HasPrefix(rel, f.Path+"/") {
			return FileInfo{}, carryover.Errorf(carryover.CodeInvalid, "path %q cannot be used: skill %q is in the way", p, f.Path).WithDetails("path", p)
		}
	}
	f, err := s.store.PutSkill(ctx, tenant, rel, b)
	if err != nil {
		return FileInfo{}, err
	}
	if err := s.syncSkills(ctx, tenant, false); err != nil {
		s.log.Warn("skills cache not updated (the store has the file; the next turn updates the cache)", "tenant", tenant, "err", err)
	}
	return FileInfo{Path: f.Path, Size: f.Size, ModifiedAt: f.UpdatedAt}, nil
}

// DeleteSkill removes a skill file: from the store, then from this node's cache.
func (s *Service) DeleteSkill(ctx context.Context, p string) error {
	rel, err := skillPath(p)
	if err != nil {
		return err
	}
	tenant := carryover.TenantFromContext(ctx)
	err = s.store.DeleteSkill(ctx, tenant, rel)
	if errors.Is(err, carryover.ErrNotFound) {
		files, lerr := s.store.ListSkills(ctx, tenant)
		for _, f := range files {
			if lerr == nil && strings.HasPrefix(f.Path, rel+"/") {
				return carryover.Errorf(carryover.CodeInvalid, "%q is a directory", p).WithDetails("path", p)
			}
		}
	}
	if err != nil {
		return err
	}
	if err := s.syncSkills(ctx, tenant, false); err != nil {
		s.log.Warn("skills cache not updated (the store has the change; the next turn updates the cache)", "tenant", tenant, "err", err)
	}
	return nil
}

// SkillsAttacher is a kernel process that can show a tenant's skills folder at /skills (the
// sandbox's); others have no /skills.
type SkillsAttacher interface {
	AttachSkills(hostDir string, writable bool) error
}

// attachSkills brings this node's cache of the session's tenant's skills up to date with the store
// and mounts it into a claimed kernel's box.
func (s *Service) attachSkills(ctx context.Context, p kernel.KernelProcess, doc carryover.Session) error {
	sa, ok := p.(SkillsAttacher)
	if !ok {
		return nil
	}
	d, err := s.skillsDir(ctx, doc.TenantName())
	if err != nil {
		return err
	}
	return sa.AttachSkills(d, doc.Sandbox.Skills == SkillsReadWrite)
}

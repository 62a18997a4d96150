package session

// skills.go: the service's side of a tenant's skills (package skills keeps them): the API's calls,
// and mounting a tenant's folder into a claimed kernel's box.

import (
	"context"
	"io"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// fileInfoOf is a skill file as the API lists it.
func fileInfoOf(f carryover.SkillFile) FileInfo {
	return FileInfo{Path: f.Path, Size: f.Size, ModifiedAt: f.UpdatedAt}
}

// ListSkills lists the tenant's skill files (from the store).
func (s *Service) ListSkills(ctx context.Context) ([]FileInfo, error) {
	files, err := s.skills.List(ctx, carryover.TenantFromContext(ctx))
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, len(files))
	for i, f := range files {
		out[i] = fileInfoOf(f)
	}
	return out, nil
}

// ReadSkill returns one of the tenant's skill files and its content (from the store).
func (s *Service) ReadSkill(ctx context.Context, p string) (FileInfo, []byte, error) {
	f, b, err := s.skills.Read(ctx, carryover.TenantFromContext(ctx), p)
	if err != nil {
		return FileInfo{}, nil, err
	}
	return fileInfoOf(f), b, nil
}

// WriteSkill writes one of the tenant's skill files (skills.Skills.Write).
func (s *Service) WriteSkill(ctx context.Context, p string, r io.Reader) (FileInfo, error) {
	f, err := s.skills.Write(ctx, carryover.TenantFromContext(ctx), p, r)
	if err != nil {
		return FileInfo{}, err
	}
	return fileInfoOf(f), nil
}

// DeleteSkill removes one of the tenant's skill files.
func (s *Service) DeleteSkill(ctx context.Context, p string) error {
	return s.skills.Delete(ctx, carryover.TenantFromContext(ctx), p)
}

// SkillsAttacher is a kernel process that can show a tenant's skills folder at /skills (the
// sandbox's); others have no /skills.
type SkillsAttacher interface {
	AttachSkills(hostDir string, writable bool) error
}

// attachSkills brings this node's cache of the session's tenant's skills up to date with the store
// and mounts it into a claimed kernel's box.
func (f *kernels) attachSkills(ctx context.Context, p kernel.KernelProcess, doc carryover.Session) error {
	sa, ok := p.(SkillsAttacher)
	if !ok {
		return nil
	}
	d, err := f.skills.Dir(ctx, doc.TenantName())
	if err != nil {
		return err
	}
	return sa.AttachSkills(d, doc.Sandbox.Skills == carryover.SkillsReadWrite)
}

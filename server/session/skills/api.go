package skills

import (
	"context"
	"io"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/workspace"
)

// api.go: the skills API (GET, PUT, DELETE /api/skills/...), each call for the tenant of its
// context, answering files in the shape of the workspace files API.

// API is the skills API over s.
type API struct {
	Skills *Skills
}

// fileInfoOf is a skill file as the API lists it.
func fileInfoOf(f carryover.SkillFile) workspace.FileInfo {
	return workspace.FileInfo{Path: f.Path, Size: f.Size, ModifiedAt: f.UpdatedAt}
}

// List lists the tenant's skill files (from the store).
func (a API) List(ctx context.Context) ([]workspace.FileInfo, error) {
	files, err := a.Skills.List(ctx, carryover.TenantFromContext(ctx))
	if err != nil {
		return nil, err
	}
	out := make([]workspace.FileInfo, len(files))
	for i, f := range files {
		out[i] = fileInfoOf(f)
	}
	return out, nil
}

// Read returns one of the tenant's skill files and its content (from the store).
func (a API) Read(ctx context.Context, p string) (workspace.FileInfo, []byte, error) {
	f, b, err := a.Skills.Read(ctx, carryover.TenantFromContext(ctx), p)
	if err != nil {
		return workspace.FileInfo{}, nil, err
	}
	return fileInfoOf(f), b, nil
}

// Write writes one of the tenant's skill files (Skills.Write).
func (a API) Write(ctx context.Context, p string, r io.Reader) (workspace.FileInfo, error) {
	f, err := a.Skills.Write(ctx, carryover.TenantFromContext(ctx), p, r)
	if err != nil {
		return workspace.FileInfo{}, err
	}
	return fileInfoOf(f), nil
}

// Delete removes one of the tenant's skill files.
func (a API) Delete(ctx context.Context, p string) error {
	return a.Skills.Delete(ctx, carryover.TenantFromContext(ctx), p)
}

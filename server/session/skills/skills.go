// Package skills keeps a tenant's skills: a folder of files (helper modules, scripts, small data)
// every session of the tenant sees at /skills (on sys.path), managed over the API. They are kept in
// the store (carryover.SkillStore), so every node of a cluster sees the same skills and a lost data
// dir loses none; each node materialises them into a cache folder (cache.go) that the sandbox
// bind-mounts. A session reads them; it writes them only when created with sandbox.skills "rw", so
// one agent's mistake cannot silently change every other session's helpers: its writes land in the
// cache and go to the store at the end of each of its turns (Sync with push). Other tenants never
// see them: each tenant's folder is its own mount.
package skills

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/carryover/carryover"
)

// Skills is one node's keeper of the tenants' skills: the store is the truth, the cache folders
// under the data dir its copy for mounting.
type Skills struct {
	store   carryover.SkillStore
	dataDir string
	log     *slog.Logger

	mu  sync.Mutex                        // one sync at a time (all tenants: syncs are short)
	man map[string]map[string]cachedSkill // tenant -> path -> what the cache holds
}

// New returns the skills of store, cached under dataDir/skills-cache.
func New(store carryover.SkillStore, dataDir string, log *slog.Logger) *Skills {
	if log == nil {
		log = slog.Default()
	}
	return &Skills{store: store, dataDir: dataDir, log: log}
}

// Path checks an API path of a skill file ("helpers/x.py"; "/skills/..." accepted) and returns it
// relative to /skills.
func Path(p string) (string, error) {
	if p == "/skills" || len(p) > 8 && p[:8] == "/skills/" {
		p = p[len("/skills"):]
	}
	if len(p) > 0 && p[0] == '/' {
		return "", carryover.Errorf(carryover.CodeInvalid, "path %q is outside /skills", p).WithDetails("path", p)
	}
	rel, err := carryover.WorkspacePath(p)
	if err == nil && rel == "" {
		err = carryover.Errorf(carryover.CodeInvalid, "a file path is required")
	}
	return rel, err
}

// List lists the tenant's skill files (from the store).
func (s *Skills) List(ctx context.Context, tenant string) ([]carryover.SkillFile, error) {
	return s.store.ListSkills(ctx, tenant)
}

// Read returns one of the tenant's skill files and its content (from the store).
func (s *Skills) Read(ctx context.Context, tenant, p string) (carryover.SkillFile, []byte, error) {
	rel, err := Path(p)
	if err != nil {
		return carryover.SkillFile{}, nil, err
	}
	return s.store.GetSkill(ctx, tenant, rel)
}

// Write writes a skill file: to the store first, then to this node's cache (atomically: a session
// importing it meanwhile sees the old or the new file, never half of one). A path that is a file's
// folder, or runs through a file, is refused: the folder could not hold both.
func (s *Skills) Write(ctx context.Context, tenant, p string, r io.Reader) (carryover.SkillFile, error) {
	rel, err := Path(p)
	if err != nil {
		return carryover.SkillFile{}, err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return carryover.SkillFile{}, err
	}
	files, err := s.store.ListSkills(ctx, tenant)
	if err != nil {
		return carryover.SkillFile{}, err
	}
	for _, f := range files {
		if strings.HasPrefix(f.Path, rel+"/") || strings.HasPrefix(rel, f.Path+"/") {
			return carryover.SkillFile{}, carryover.Errorf(carryover.CodeInvalid, "path %q cannot be used: skill %q is in the way", p, f.Path).WithDetails("path", p)
		}
	}
	f, err := s.store.PutSkill(ctx, tenant, rel, b)
	if err != nil {
		return carryover.SkillFile{}, err
	}
	if err := s.Sync(ctx, tenant, false); err != nil {
		s.log.Warn("skills cache not updated (the store has the file; the next turn updates the cache)", "tenant", tenant, "err", err)
	}
	return f, nil
}

// Delete removes a skill file: from the store, then from this node's cache.
func (s *Skills) Delete(ctx context.Context, tenant, p string) error {
	rel, err := Path(p)
	if err != nil {
		return err
	}
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
	if err := s.Sync(ctx, tenant, false); err != nil {
		s.log.Warn("skills cache not updated (the store has the change; the next turn updates the cache)", "tenant", tenant, "err", err)
	}
	return nil
}

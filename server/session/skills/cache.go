package skills

// skills_cache.go: this node's cache of the tenants' skills, the folders the sandbox bind-mounts at
// /skills. The store is the truth; a cache folder is brought up to date from it when a kernel is
// attached, at the start of every turn and after an API change, and an "rw" session's own writes
// are carried to the store at the end of each of its turns. A manifest per tenant (beside its folder)
// records, for each file the cache holds, the store's hash and the local file's size and mtime as
// last synced: a file that differs from it was written by a session (push it), a store entry whose
// hash differs from it was changed elsewhere (pull it). A folder without a manifest is not trusted
// (a crash, an old version): it is emptied and rebuilt from the store. The folder itself is never
// replaced, only its content, because running boxes hold mounts of it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"

	"github.com/carryover/carryover"
)

// cachedSkill is one cached file as last synced.
type cachedSkill struct {
	Hash    string `json:"hash"`     // the store's hash of the content
	Size    int64  `json:"size"`     // the local file's size
	ModNano int64  `json:"mod_nano"` // the local file's mtime
}

func (s *Skills) cacheRoot() string { return filepath.Join(s.dataDir, "skills-cache") }

func (s *Skills) cacheDir(tenant string) string {
	return filepath.Join(s.cacheRoot(), hex.EncodeToString([]byte(tenant)))
}

// Dir is the host folder of a tenant's skills, up to date with the store: what a sandbox mounts at
// /skills.
func (s *Skills) Dir(ctx context.Context, tenant string) (string, error) {
	if err := s.Sync(ctx, tenant, false); err != nil {
		return "", fmt.Errorf("skills: %w", err)
	}
	return s.cacheDir(tenant), nil
}

// Sync brings the tenant's cache folder up to date with the store; with push, files a session
// changed or removed in the folder are first carried to the store.
func (s *Skills) Sync(ctx context.Context, tenant string, push bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.cacheDir(tenant)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	man, err := s.loadSkillManifest(root, tenant)
	if err != nil {
		return err
	}
	before := maps.Clone(man)
	defer func() {
		if _, err := os.Stat(s.manifestPath(tenant)); err == nil && maps.Equal(before, man) {
			return // nothing changed: no write on every turn
		}
		if werr := s.saveSkillManifest(tenant, man); werr != nil {
			s.log.Warn("skills manifest not saved (the cache will be rebuilt)", "tenant", tenant, "err", werr)
		}
	}()
	if push {
		if err := s.pushSkills(ctx, root, tenant, man); err != nil {
			return err
		}
	}
	return s.pullSkills(ctx, root, tenant, man)
}

// pushSkills carries the folder's changes since the last sync to the store (not __pycache__).
func (s *Skills) pushSkills(ctx context.Context, root *os.Root, tenant string, man map[string]cachedSkill) error {
	seen := map[string]bool{}
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "__pycache__" {
			return fs.SkipDir // Python's compiled modules: derived, each node makes its own
		}
		if err != nil || !d.Type().IsRegular() || isSkillTemp(p) {
			return nil
		}
		seen[p] = true
		info, err := d.Info()
		if err != nil {
			return nil
		}
		c, ok := man[p]
		if ok && c.Size == info.Size() && c.ModNano == info.ModTime().UnixNano() {
			return nil
		}
		b, err := root.ReadFile(p)
		if err != nil {
			return nil // gone meanwhile: the next sync sees it
		}
		if h := carryover.SkillHash(b); !ok || h != c.Hash {
			if _, err := s.store.PutSkill(ctx, tenant, p, b); err != nil {
				return err
			}
			man[p] = cachedSkill{Hash: h, Size: info.Size(), ModNano: info.ModTime().UnixNano()}
		} else {
			man[p] = cachedSkill{Hash: h, Size: info.Size(), ModNano: info.ModTime().UnixNano()}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for p := range man {
		if !seen[p] {
			if err := s.store.DeleteSkill(ctx, tenant, p); err != nil && !errors.Is(err, carryover.ErrNotFound) {
				return err
			}
			delete(man, p)
		}
	}
	return nil
}

// pullSkills writes the store's changed files into the folder and removes the ones it no longer has.
func (s *Skills) pullSkills(ctx context.Context, root *os.Root, tenant string, man map[string]cachedSkill) error {
	files, err := s.store.ListSkills(ctx, tenant)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
		if c, ok := man[f.Path]; ok && c.Hash == f.Hash {
			continue
		}
		_, b, err := s.store.GetSkill(ctx, tenant, f.Path)
		if errors.Is(err, carryover.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		c, err := writeSkillFile(root, f.Path, b)
		if err != nil {
			s.log.Warn("skill not materialised in the cache", "tenant", tenant, "path", f.Path, "err", err)
			continue
		}
		man[f.Path] = c
	}
	for p := range man {
		if !want[p] {
			if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			delete(man, p)
		}
	}
	return nil
}

// writeSkillFile replaces p in the folder atomically (parents made) and returns what it wrote.
func writeSkillFile(root *os.Root, p string, b []byte) (cachedSkill, error) {
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return cachedSkill{}, err
		}
	}
	tmp := path.Join(path.Dir(p), skillTempPrefix+randomSuffix())
	if err := root.WriteFile(tmp, b, 0o644); err != nil {
		_ = root.Remove(tmp)
		return cachedSkill{}, err
	}
	if err := root.Rename(tmp, p); err != nil {
		_ = root.Remove(tmp)
		return cachedSkill{}, err
	}
	info, err := root.Stat(p)
	if err != nil {
		return cachedSkill{}, err
	}
	return cachedSkill{Hash: carryover.SkillHash(b), Size: info.Size(), ModNano: info.ModTime().UnixNano()}, nil
}

const skillTempPrefix = ".carryover-upload-"

// randomSuffix names an upload's temporary file.
func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isSkillTemp(p string) bool {
	b := path.Base(p)
	return len(b) >= len(skillTempPrefix) && b[:len(skillTempPrefix)] == skillTempPrefix
}

func (s *Skills) manifestPath(tenant string) string { return s.cacheDir(tenant) + ".json" }

// loadSkillManifest returns the tenant's manifest, reading it on first use; a folder without one is
// emptied (it is rebuilt from the store).
func (s *Skills) loadSkillManifest(root *os.Root, tenant string) (map[string]cachedSkill, error) {
	if m, ok := s.man[tenant]; ok {
		return m, nil
	}
	if s.man == nil {
		s.man = map[string]map[string]cachedSkill{}
	}
	m := map[string]cachedSkill{}
	b, err := os.ReadFile(s.manifestPath(tenant))
	if err == nil && json.Unmarshal(b, &m) == nil {
		s.man[tenant] = m
		return m, nil
	}
	m = map[string]cachedSkill{}
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := root.RemoveAll(e.Name()); err != nil {
			return nil, err
		}
	}
	s.man[tenant] = m
	return m, nil
}

// saveSkillManifest writes the tenant's manifest atomically.
func (s *Skills) saveSkillManifest(tenant string, m map[string]cachedSkill) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	p := s.manifestPath(tenant)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

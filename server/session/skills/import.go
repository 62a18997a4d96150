package skills

// skills_import.go: before skills were kept in the store, a version kept them only in the data dir,
// at skills/<hex tenant>. At start-up such a folder is imported into the store once, then renamed
// skills.imported (kept, never deleted: nothing a user saved is lost), so a later start does not
// import again. A file the store already has with other content is not overwritten: it is imported
// beside it as <path>.imported, with a warning in the log.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
)

// ImportLegacy imports data_dir/skills into the store (see above); the service calls it at start-up.
func (s *Skills) ImportLegacy(ctx context.Context) error {
	old := filepath.Join(s.dataDir, "skills")
	tenants, err := os.ReadDir(old)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("skills import: %w", err)
	}
	n := 0
	for _, t := range tenants {
		name, err := hex.DecodeString(t.Name())
		if err != nil || !t.IsDir() {
			continue
		}
		k, err := s.importTenantSkills(ctx, string(name), filepath.Join(old, t.Name()))
		if err != nil {
			return fmt.Errorf("skills import of tenant %q (nothing is lost: %s stays until an import succeeds): %w", name, old, err)
		}
		n += k
	}
	dest := old + ".imported"
	if _, err := os.Stat(dest); err == nil {
		dest += "-" + time.Now().UTC().Format("20060102T150405")
	}
	if err := os.Rename(old, dest); err != nil {
		return fmt.Errorf("skills import: %w", err)
	}
	s.log.Info("skills imported from the data dir into the store; the old folder is kept", "files", n, "kept_at", dest)
	return nil
}

// importTenantSkills imports one tenant's folder and returns how many files went to the store.
func (s *Skills) importTenantSkills(ctx context.Context, tenant, dir string) (int, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	n := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || isSkillTemp(p) {
			return nil
		}
		b, err := root.ReadFile(p)
		if err != nil {
			return err
		}
		f, _, err := s.store.GetSkill(ctx, tenant, p)
		switch {
		case err == nil && f.Hash == carryover.SkillHash(b):
			return nil
		case err == nil:
			s.log.Warn("skill in the data dir differs from the store's: imported beside it", "tenant", tenant, "path", p, "as", p+".imported")
			p += ".imported"
		case !errors.Is(err, carryover.ErrNotFound):
			return err
		}
		if _, err := s.store.PutSkill(ctx, tenant, p, b); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

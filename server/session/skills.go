package session

// skills.go: a tenant's skills are a folder of files (helper modules, scripts, small data) every
// session of the tenant sees at /skills (on sys.path), managed over the API and kept in the data
// dir at skills/<tenant> (hex-encoded name), beside the workspaces. A session reads them; it writes
// them only when created with sandbox.skills "rw", so one agent's mistake cannot silently change
// every other session's helpers. Other tenants never see them: each tenant's folder is its own
// mount.

import (
	"context"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// Skills modes of a session (carryover.Sandbox.Skills).
const (
	SkillsReadOnly  = "ro"
	SkillsReadWrite = "rw"
)

// skillsDir is the host folder of a tenant's skills (made on first use).
func (s *Service) skillsDir(tenant string) (string, error) {
	d := filepath.Join(s.cfg.DataDir, "skills", hex.EncodeToString([]byte(tenant)))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	return d, nil
}

func (s *Service) skillsRoot(ctx context.Context) (*os.Root, error) {
	d, err := s.skillsDir(carryover.TenantFromContext(ctx))
	if err != nil {
		return nil, err
	}
	return os.OpenRoot(d)
}

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

// ListSkills lists the tenant's skill files.
func (s *Service) ListSkills(ctx context.Context) ([]FileInfo, error) {
	root, err := s.skillsRoot(ctx)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := []FileInfo{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			out = append(out, FileInfo{Path: p, Size: info.Size(), ModifiedAt: info.ModTime().UTC()})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// ReadSkill opens one of the tenant's skill files.
func (s *Service) ReadSkill(ctx context.Context, p string) (*os.File, fs.FileInfo, error) {
	rel, err := skillPath(p)
	if err != nil {
		return nil, nil, err
	}
	root, err := s.skillsRoot(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fileErr(p, err)
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, carryover.Errorf(carryover.CodeInvalid, "%q is not a regular file", p).WithDetails("path", p)
	}
	return f, info, nil
}

// WriteSkill writes a skill file (parents made) atomically: a session importing it meanwhile sees
// the old or the new file, never half of one.
func (s *Service) WriteSkill(ctx context.Context, p string, r io.Reader) (FileInfo, error) {
	rel, err := skillPath(p)
	if err != nil {
		return FileInfo{}, err
	}
	root, err := s.skillsRoot(ctx)
	if err != nil {
		return FileInfo{}, err
	}
	defer root.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return FileInfo{}, fileErr(p, err)
		}
	}
	tmp := path.Join(path.Dir(rel), ".carryover-upload-"+randomID(""))
	f, err := root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return FileInfo{}, fileErr(p, err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return FileInfo{}, fileErr(p, err)
	}
	return FileInfo{Path: rel, Size: n, ModifiedAt: time.Now().UTC()}, nil
}

// DeleteSkill removes a skill file.
func (s *Service) DeleteSkill(ctx context.Context, p string) error {
	rel, err := skillPath(p)
	if err != nil {
		return err
	}
	root, err := s.skillsRoot(ctx)
	if err != nil {
		return err
	}
	defer root.Close()
	info, err := root.Lstat(rel)
	if err != nil {
		return fileErr(p, err)
	}
	if info.IsDir() {
		return carryover.Errorf(carryover.CodeInvalid, "%q is a directory", p).WithDetails("path", p)
	}
	return fileErr(p, root.Remove(rel))
}

// SkillsAttacher is a kernel process that can show a tenant's skills folder at /skills (the
// sandbox's); others have no /skills.
type SkillsAttacher interface {
	AttachSkills(hostDir string, writable bool) error
}

// attachSkills mounts the session's tenant's skills into a claimed kernel's box.
func (s *Service) attachSkills(p kernel.KernelProcess, doc carryover.Session) error {
	sa, ok := p.(SkillsAttacher)
	if !ok {
		return nil
	}
	d, err := s.skillsDir(doc.TenantName())
	if err != nil {
		return err
	}
	return sa.AttachSkills(d, doc.Sandbox.Skills == SkillsReadWrite)
}

package sandbox

// packages.go makes `pip install`, `%pip install` and `python -m pip install` in a box install into
// the session's own prefix inside its workspace (ProvisionerConfig.PackagesDir, /workspace/.packages),
// which the workspace snapshot saves like any other files: so installed packages come back with the
// files, before the namespace (restore writes files first), after a kernel death, a rotation, a
// hibernation or a restart, are copied by forks, and identical files in many sessions are stored
// once (content-addressed chunks).
//
// How: PIP_PREFIX points pip at the prefix (pip skips its PEP 668 "externally-managed-environment"
// check for --prefix installs, so Debian's interpreter never refuses, and nothing of the system is
// touched), PYTHONPATH puts the prefix's site dir on sys.path ahead of the system's (a session's
// newer version wins, as in a virtualenv), and PATH gets its bin dir. The site dir must exist when
// the kernel starts, or Python caches "no finder" for it and a package installed later is not
// found until importlib.invalidate_caches(): so every box's empty /workspace mount point holds it
// (a kernel restarted in its box, with the session's workspace attached, gets it made there). The
// finder made at start-up survives the workspace mounted over it and a directory that is missing
// for a while: it re-lists whenever the directory's mtime changes. Workspaces without packages
// get no .packages dir.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// PackagePaths are where pip's --prefix puts things for this interpreter, inside the box.
type PackagePaths struct {
	Prefix  string // e.g. /workspace/.packages
	Site    string // purelib, e.g. /workspace/.packages/local/lib/python3.11/dist-packages
	PlatLib string // platlib ("" when the same as Site)
	Bin     string // scripts
}

// FindPackagePaths asks python (the box's interpreter, same path inside as outside) for the
// layout of a --prefix install into prefix, with the scheme pip uses (Debian's is posix_local).
func FindPackagePaths(python, prefix string) (PackagePaths, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := `import sys, sysconfig
p = sysconfig.get_paths(sysconfig.get_default_scheme(), vars={'base': sys.argv[1], 'platbase': sys.argv[1]})
print(p['purelib']); print(p['platlib']); print(p['scripts'])`
	out, err := exec.CommandContext(ctx, python, "-I", "-c", code, prefix).Output()
	if err != nil {
		return PackagePaths{}, fmt.Errorf("sandbox: package paths from %s: %w", python, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return PackagePaths{}, fmt.Errorf("sandbox: package paths from %s: %q", python, out)
	}
	pp := PackagePaths{Prefix: prefix, Site: f[0], Bin: f[2]}
	if f[1] != f[0] {
		pp.PlatLib = f[1]
	}
	for _, d := range []string{pp.Site, pp.PlatLib, pp.Bin} {
		if d != "" && !strings.HasPrefix(d, prefix+"/") {
			return PackagePaths{}, fmt.Errorf("sandbox: package dir %s is outside the prefix %s", d, prefix)
		}
	}
	return pp, nil
}

// env adds pip's and Python's variables to a box's environment (nil pp: none).
func (pp *PackagePaths) env(env map[string]string) {
	if pp == nil {
		return
	}
	py := pp.Site
	if pp.PlatLib != "" {
		py += ":" + pp.PlatLib
	}
	env["PIP_PREFIX"] = pp.Prefix
	env["PYTHONPATH"] = py + ":" + SkillsPath
	env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
	env["PATH"] = pp.Bin + ":/usr/local/bin:/usr/bin:/bin"
}

// makeDirs creates the site dirs under the host dir mounted at /workspace (inside paths map to
// ws/<path below /workspace>). Owned by root on disk: the idmapped mount shows them as the box's.
func (pp *PackagePaths) makeDirs(ws string) error {
	if pp == nil || ws == "" {
		return nil
	}
	for _, d := range []string{pp.Site, pp.PlatLib} {
		rel, ok := strings.CutPrefix(d, "/workspace/")
		if d == "" || !ok {
			continue
		}
		// Never through a link the sandbox made: each component must be a real directory.
		if err := mkdirNoFollow(ws, path.Clean(rel)); err != nil {
			return fmt.Errorf("sandbox: packages dir: %w", err)
		}
	}
	return nil
}

// mkdirNoFollow makes rel under root one component at a time through os.Root, which refuses to
// leave root (symlinks included).
func mkdirNoFollow(root, rel string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	cur := ""
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		if err := r.Mkdir(cur, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

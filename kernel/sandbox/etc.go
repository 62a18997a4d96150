package sandbox

// etc.go: a box's /etc as one directory, bound once.
//
// Bubblewrap reads the whole mount table (/proc/self/mountinfo, which the kernel formats line by
// line) for every bind it makes, and every live session adds its own mounts to the host's table.
// Binding the /etc allowlist entry by entry (27 binds) made a box's start grow with the sessions
// on the node: bwrap alone took 17 ms beside 131 mounts, 41 ms beside 622 and 67 ms beside 1,061;
// with /etc bound once, 7, 15 and 18 ms. So the allowlist is copied into a directory of its own
// and that is bound read-only at /etc.
//
// The copy is what a bind shows: an entry that is itself a symlink is followed (a bind resolves
// its source), symlinks inside a directory are kept as they are (alternatives' point into /usr).
// It is checked against the host's entries at most every etcRecheck, at a box's start, and made
// again when one changed (by content: a file rewritten as it was, as resolv.conf often is, makes
// no new copy): a box started after a change to the host's /etc sees it. A box keeps the copy it
// started with; a copy no box binds any more and that is not the current one is removed. Anything
// that keeps the copy from being made (an entry too large, a full disk) falls back to the binds,
// with a warning.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// etcRecheck is how often, at most, the copy is compared with the host's /etc.
const etcRecheck = 5 * time.Second

// etcMaxBytes caps the copy: an allowlist naming a large tree is bound entry by entry instead.
const etcMaxBytes = 64 << 20

// etcHashBytes: files up to this size are compared by content, larger ones by size and mtime.
const etcHashBytes = 256 << 10

// etcCopy keeps the current copy of the allowlist. Safe for concurrent use.
type etcCopy struct {
	src     string   // the host's /etc (a test's own dir in tests)
	base    string   // where the generations are made: <base>/1, <base>/2, ...
	entries []string // the allowlist, relative to src, cleaned
	points  []string // mount points the copy must hold (relative): passwd, group, read-only binds under /etc

	mu      sync.Mutex
	dir     string // the current generation; "" when none could be made
	sig     uint64 // the host entries' signature dir was made from
	checked time.Time
	gen     int
	users   map[string]int // generation -> boxes that bind it (acquire, release)
	warned  bool
}

// newEtcCopy prepares (empties) base for the copies of src's entries; points are paths under src
// that later binds mount on (placeholders are made for them).
func newEtcCopy(src, base string, entries, points []string) *etcCopy {
	_ = os.RemoveAll(base) // a stopped server's generations
	e := &etcCopy{src: src, base: base, users: map[string]int{}}
	for _, n := range entries {
		if n = filepath.Clean("/" + n)[1:]; n != "" && !within(n, entries) && !slices.Contains(e.entries, n) {
			e.entries = append(e.entries, n)
		}
	}
	for _, n := range points {
		if n = filepath.Clean("/" + n)[1:]; n != "" {
			e.points = append(e.points, n)
		}
	}
	return e
}

// acquire returns the copy a box is to bind at /etc (current) and counts the box among its users
// until release. An error means: bind the entries one by one.
func (e *etcCopy) acquire(now time.Time) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dir, err := e.current(now)
	if err == nil {
		e.users[dir]++
	}
	return dir, err
}

// release is a box's end: a copy no box binds and that is not the current one is removed.
func (e *etcCopy) release(dir string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.users[dir]--; e.users[dir] <= 0 {
		delete(e.users, dir)
		if dir != e.dir {
			_ = os.RemoveAll(dir)
		}
	}
}

// current returns the copy to bind at /etc, made again when the host's entries changed since it
// was made (checked at most every etcRecheck); the one it replaces is removed when no box binds it.
// The caller holds e.mu.
func (e *etcCopy) current(now time.Time) (string, error) {
	if e.dir != "" && now.Sub(e.checked) < etcRecheck {
		return e.dir, nil
	}
	sig, err := e.signature()
	if err != nil {
		return "", err
	}
	e.checked = now
	if e.dir != "" && sig == e.sig {
		return e.dir, nil
	}
	dir, err := e.make()
	if err != nil {
		return "", err
	}
	if old := e.dir; old != "" && e.users[old] == 0 {
		_ = os.RemoveAll(old)
	}
	e.dir, e.sig = dir, sig
	return dir, nil
}

// within reports whether entry n is inside another of entries (copied with it, not again).
func within(n string, entries []string) bool {
	for _, o := range entries {
		if o = filepath.Clean("/" + o)[1:]; o != "" && o != n && strings.HasPrefix(n, o+"/") {
			return true
		}
	}
	return false
}

// close removes every generation (no box of the Manager is left to bind them).
func (e *etcCopy) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dir = ""
	_ = os.RemoveAll(e.base)
}

// signature hashes what the copy depends on: each entry's resolved path, and the name, type and
// mode of it and of everything under it, with a file's content (size and mtime past etcHashBytes)
// and a symlink's target.
func (e *etcCopy) signature() (uint64, error) {
	h := fnv.New64a()
	for _, n := range e.entries {
		root, err := filepath.EvalSymlinks(filepath.Join(e.src, n))
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(h, "%s missing\n", n)
			continue
		}
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(h, "%s -> %s\n", n, root)
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %v\n", p, fi.Mode())
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				fmt.Fprintf(h, "-> %s\n", target)
			case fi.Mode().IsRegular() && fi.Size() <= etcHashBytes:
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "%d\n", len(b))
				h.Write(b)
			case fi.Mode().IsRegular():
				fmt.Fprintf(h, "%d %d\n", fi.Size(), fi.ModTime().UnixNano())
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return h.Sum64(), nil
}

// make copies the entries into a new generation and returns its path.
func (e *etcCopy) make() (string, error) {
	e.gen++
	dir := filepath.Join(e.base, strconv.Itoa(e.gen))
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // the umask's bits off
		return "", err
	}
	budget := int64(etcMaxBytes)
	for _, n := range e.entries {
		if err := e.copyEntry(tmp, n, &budget); err != nil {
			_ = os.RemoveAll(tmp)
			return "", fmt.Errorf("/etc/%s: %w", n, err)
		}
	}
	if err := e.makePoints(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	return dir, nil
}

// copyEntry copies one allowlist entry (followed if it is a symlink, its tree's symlinks kept).
func (e *etcCopy) copyEntry(dst, n string, budget *int64) error {
	root, err := filepath.EvalSymlinks(filepath.Join(e.src, n))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // skipped, as a bind of a missing entry is
	}
	if err != nil {
		return err
	}
	if err := mkdirParents(dst, n); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		to := filepath.Join(dst, n, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if err := os.Mkdir(to, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return os.Chmod(to, fi.Mode().Perm())
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case fi.Mode().IsRegular():
			if *budget -= fi.Size(); *budget < 0 {
				return fmt.Errorf("the /etc allowlist holds more than %d MiB", etcMaxBytes>>20)
			}
			return copyFile(p, to, fi.Mode().Perm())
		}
		return nil // sockets, devices, fifos: not copied
	})
}

// makePoints makes the placeholders later binds mount on: a read-only copy cannot get them then.
func (e *etcCopy) makePoints(dir string) error {
	for _, n := range e.points {
		if err := mkdirParents(dir, n); err != nil {
			return err
		}
		to := filepath.Join(dir, n)
		if _, err := os.Lstat(to); err == nil {
			continue
		}
		fi, err := os.Stat(filepath.Join(e.src, n))
		if err == nil && fi.IsDir() {
			err = os.Mkdir(to, 0o755)
		} else {
			err = os.WriteFile(to, nil, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// mkdirParents makes rel's missing parents under dir, 0755.
func mkdirParents(dir, rel string) error {
	parent := filepath.Dir(filepath.Join(dir, rel))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	for p := parent; p != dir && strings.HasPrefix(p, dir); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies regular file src to a new file dst with mode perm.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm) // the umask's bits off
}

// etcMountPoints are the paths under /etc (relative) that binds after the copy's mount on: the
// box's passwd and group, and the configured read-only binds under /etc.
func etcMountPoints(roBinds []string) []string {
	points := []string{"passwd", "group"}
	for _, rb := range roBinds {
		if rb = filepath.Clean(rb); strings.HasPrefix(rb, "/etc/") {
			points = append(points, strings.TrimPrefix(rb, "/etc/"))
		}
	}
	return points
}

// fallback logs, once, that boxes bind the allowlist entry by entry because no copy was made.
func (e *etcCopy) fallback(log *slog.Logger, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.warned {
		e.warned = true
		log.Warn("sandbox: /etc is bound entry by entry (slower box starts on a node with many sessions): its copy could not be made", "err", err)
	}
}

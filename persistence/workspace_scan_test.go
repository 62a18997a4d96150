package persistence

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/carryover/carryover"
)

// TestScanWorkspaceAgreesWithTheWalk: the scan by directory descriptors finds what fs.WalkDir over
// the root found (the oracle below, the scan as it was): the same files in the same order with the
// same sizes, times and modes, the same skips with the same reasons, under each set of limits.
func TestScanWorkspaceAgreesWithTheWalk(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, n int) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for i, rel := range []string{"a", "a.txt", "b/c.txt", "b/d/e.bin", "B.txt", "_x", "a-b/z", ".hidden", ".cache/x",
		".packages/pkg/mod.py", "big.bin", "deep/1/2/3/4/f", "sp ace/名前.txt"} {
		if rel == "a" {
			continue
		}
		write(rel, 10+i*100)
	}
	write("a/inner", 5)
	write("big.bin", 5000)
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", filepath.Join(dir, "dirlink")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "b", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "B.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, lim := range []FileLimits{{}, {SaveHidden: true}, {MaxFileBytes: 1000}, {MaxTotalBytes: 1500}, {MaxFileBytes: 4000, MaxTotalBytes: 3000}} {
		got, gotSkip, err := scanWorkspace(root, lim)
		want, wantSkip, werr := scanWorkspaceWalk(root, lim)
		if err != nil || werr != nil {
			t.Fatalf("limits %+v: %v / %v", lim, err, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("limits %+v: files\n%v\nwant\n%v", lim, got, want)
		}
		if !reflect.DeepEqual(gotSkip, wantSkip) {
			t.Errorf("limits %+v: skipped\n%v\nwant\n%v", lim, gotSkip, wantSkip)
		}
	}
}

// BenchmarkScanWorkspace: a workspace of 10,000 small files in one directory, the shape of a data
// scientist's folder of samples, by the scan and by the walk it replaced.
func BenchmarkScanWorkspace(b *testing.B) {
	dir := b.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		if err := os.WriteFile(filepath.Join(dir, "data", fmt.Sprintf("f%05d.txt", i)), []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		name string
		scan func(*os.Root, FileLimits) ([]fileCandidate, []carryover.FileSkip, error)
	}{{"fd", scanWorkspace}, {"walk", scanWorkspaceWalk}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if cands, _, err := c.scan(root, FileLimits{}); err != nil || len(cands) != 10000 {
					b.Fatal(len(cands), err)
				}
			}
		})
	}
}

// scanWorkspaceWalk is the scan as it was (fs.WalkDir over root.FS, a stat by path per file): the
// oracle the faster scan must agree with. It lists the files to save under root in lexical order and the ones it skips, applying
// the limits: the total budget is spent in walk order, so which files fit is deterministic.
func scanWorkspaceWalk(root *os.Root, lim FileLimits) ([]fileCandidate, []carryover.FileSkip, error) {
	var (
		cands   []fileCandidate
		skipped = []carryover.FileSkip{}
		total   int64
	)
	skip := func(rel, reason string) { skipped = append(skipped, carryover.FileSkip{Path: rel, Reason: reason}) }
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			skip(rel, "unreadable: "+err.Error())
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if rel == "." {
			return nil
		}
		if isHidden(d.Name()) && !lim.SaveHidden && rel != PackagesDir {
			skip(rel, SkipHidden)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			skip(rel, SkipSymlink)
			return nil
		case d.IsDir():
			return nil
		case !t.IsRegular():
			skip(rel, "special file ("+t.String()+")")
			return nil
		}
		info, err := d.Info()
		if err != nil {
			skip(rel, "unreadable: "+err.Error())
			return nil
		}
		size := info.Size()
		if lim.MaxFileBytes > 0 && size > lim.MaxFileBytes {
			skip(rel, fmt.Sprintf("larger than persistence.max_file_bytes (%d)", lim.MaxFileBytes))
			return nil
		}
		if lim.MaxTotalBytes > 0 && total+size > lim.MaxTotalBytes {
			skip(rel, fmt.Sprintf("workspace over persistence.max_workspace_bytes (%d)", lim.MaxTotalBytes))
			return nil
		}
		total += size
		cands = append(cands, fileCandidate{rel: rel, size: size, mtime: info.ModTime().UTC(), mode: uint32(info.Mode().Perm())})
		return nil
	})
	return cands, skipped, err
}

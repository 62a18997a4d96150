package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// etcSource makes a stand-in for the host's /etc: a file, a symlink entry (followed), a directory
// holding a symlink to a large file (kept as a symlink), a nested entry, a fifo (not copied).
func etcSource(t *testing.T) (src, outside string) {
	t.Helper()
	src, outside = t.TempDir(), t.TempDir()
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(src, "hosts"), "127.0.0.1 localhost\n", 0o644)
	write(filepath.Join(outside, "zone"), "UTC\n", 0o644)
	if err := os.Symlink(filepath.Join(outside, "zone"), filepath.Join(src, "localtime")); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(outside, "big")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 1<<30); err != nil { // sparse: a copy would be 1 GiB
		t.Fatal(err)
	}
	write(filepath.Join(src, "alternatives", "README"), "alts\n", 0o600)
	if err := os.Symlink(big, filepath.Join(src, "alternatives", "libblas.so")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(src, "ssl", "certs", "ca.pem"), "CERT\n", 0o644)
	write(filepath.Join(src, "ssl", "private", "key"), "SECRET\n", 0o600)
	if err := syscall.Mkfifo(filepath.Join(src, "alternatives", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(src, "passwd"), "root:x:0:0::/root:/bin/sh\n", 0o644)
	return src, outside
}

func readAll(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEtcCopyIsWhatBindsShow: the copy holds the allowlist as binds of it would show it, the mount
// points later binds need, and nothing else.
func TestEtcCopyIsWhatBindsShow(t *testing.T) {
	src, outside := etcSource(t)
	e := newEtcCopy(src, filepath.Join(t.TempDir(), "etc"), []string{"hosts", "localtime", "alternatives",
		"ssl/certs", "ssl/certs/ca.pem", "missing", "/../hosts"}, etcMountPoints([]string{"/etc/tools/conf", "/opt/x"}))
	dir, err := e.acquire(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		rel, _ := filepath.Rel(dir, p)
		got = append(got, rel+" "+fi.Mode().String())
		return err
	})
	want := []string{". drwxr-xr-x", "alternatives drwxr-xr-x", "alternatives/README -rw-------",
		"alternatives/libblas.so Lrwxrwxrwx", "group -rw-r--r--", "hosts -rw-r--r--", "localtime -rw-r--r--",
		"passwd -rw-r--r--", "ssl drwxr-xr-x", "ssl/certs drwxr-xr-x", "ssl/certs/ca.pem -rw-r--r--",
		"tools drwxr-xr-x", "tools/conf -rw-r--r--"}
	if !slices.Equal(got, want) {
		t.Errorf("the copy holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := readAll(t, filepath.Join(dir, "localtime")); s != "UTC\n" {
		t.Errorf("a symlink entry is followed, as a bind does: %q", s)
	}
	if target, _ := os.Readlink(filepath.Join(dir, "alternatives", "libblas.so")); target != filepath.Join(outside, "big") {
		t.Errorf("a symlink inside a directory is kept as it is: %q", target)
	}
	if s := readAll(t, filepath.Join(dir, "passwd")); s != "" {
		t.Errorf("passwd is a mount point for the box's own, not the host's: %q", s)
	}
}

// TestEtcCopyFollowsTheHost: a change to an entry's content reaches the copy at the next check
// after etcRecheck, as a new generation; the old one stays while a box binds it and goes with its
// last box; a file rewritten as it was (a new mtime) makes no new copy.
func TestEtcCopyFollowsTheHost(t *testing.T) {
	src, _ := etcSource(t)
	base := filepath.Join(t.TempDir(), "etc")
	e := newEtcCopy(src, base, []string{"hosts", "ssl/certs"}, nil)
	now := time.Now()
	first, err := e.acquire(now)
	if err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(src, "hosts")
	if err := os.Chtimes(hosts, now.Add(time.Hour), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if again, _ := e.acquire(now.Add(2 * etcRecheck)); again != first {
		t.Errorf("an /etc rewritten as it was was copied again: %s, then %s", first, again)
	}
	if err := os.WriteFile(hosts, []byte("10.0.0.1 db\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "ssl", "certs", "new.pem"), []byte("NEW\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if soon, _ := e.acquire(now.Add(2*etcRecheck + time.Second)); soon != first {
		t.Errorf("checked again before etcRecheck passed: %s", soon)
	}
	later, err := e.acquire(now.Add(4 * etcRecheck))
	if err != nil {
		t.Fatal(err)
	}
	if later == first {
		t.Fatal("the host's change did not make a new copy")
	}
	if s := readAll(t, filepath.Join(later, "hosts")); s != "10.0.0.1 db\n" {
		t.Errorf("the new copy's hosts: %q", s)
	}
	if s := readAll(t, filepath.Join(later, "ssl", "certs", "new.pem")); s != "NEW\n" {
		t.Errorf("the new copy's new cert: %q", s)
	}
	for i := range 3 { // the three boxes that bound the first copy end; it goes with the last
		if s := readAll(t, filepath.Join(first, "hosts")); s != "127.0.0.1 localhost\n" {
			t.Errorf("the old copy changed under the boxes that bind it: %q", s)
		}
		e.release(first)
		if _, err := os.Stat(first); (i < 2) != (err == nil) {
			t.Errorf("after %d of 3 boxes of the old copy ended: %v", i+1, err)
		}
	}
	e.release(later)
	if _, err := os.Stat(later); err != nil {
		t.Errorf("the current copy was removed with its last box: %v", err)
	}
	e.close()
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Errorf("close left %s: %v", base, err)
	}
}

// TestEtcCopyRefusesALargeTree: an allowlist past etcMaxBytes is not copied (the boxes bind it
// entry by entry instead), and nothing half-made is left.
func TestEtcCopyRefusesALargeTree(t *testing.T) {
	src, _ := etcSource(t)
	if err := os.Truncate(filepath.Join(src, "hosts"), etcMaxBytes+1); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "etc")
	e := newEtcCopy(src, base, []string{"ssl/certs", "hosts"}, nil)
	if dir, err := e.acquire(time.Now()); err == nil || !strings.Contains(err.Error(), "/etc/hosts") {
		t.Fatalf("a copy past the cap: %q, %v", dir, err)
	}
	left, _ := os.ReadDir(base)
	if len(left) != 0 {
		t.Errorf("a failed copy left %v", left)
	}
}

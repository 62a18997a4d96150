package servertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/carryover/carryover/internal/sandboxtest"
)

// TestServerMountsUnder: a loop mount below the dir whose image lies in the dir (a server's
// workspace disk) is found and detached; the dir's own mount (a test's small disk) and a loop
// mount of an image from elsewhere are left alone.
func TestServerMountsUnder(t *testing.T) {
	if os.Geteuid() != 0 {
		// The workspace disks this clean-up is for exist only in the sandbox, which needs root too:
		// make test (sandbox required) fails here rather than skip.
		sandboxtest.Missing(t, "loop mounts need root")
	}
	dir, elsewhere := t.TempDir(), t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	loop := func(img, at string) {
		for _, c := range [][]string{{"mkdir", "-p", filepath.Dir(img)}, {"truncate", "-s", "8M", img}, {"mkfs.ext4", "-q", "-F", img}, {"mkdir", "-p", at}, {"mount", "-o", "loop", img, at}} {
			if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v: %s", c, err, out)
			}
		}
		t.Cleanup(func() { syscall.Unmount(at, syscall.MNT_DETACH) })
	}
	ws := filepath.Join(dir, "data", "disks", "s.img.d")
	loop(filepath.Join(dir, "data", "s.img"), ws)
	foreign := filepath.Join(dir, "mnt")
	loop(filepath.Join(elsewhere, "f.img"), foreign)
	if got := serverMountsUnder(dir); !slices.Equal(got, []string{ws}) {
		t.Fatalf("server mounts under %s: %v, want only %s", dir, got, ws)
	}
	if left := unmountLeft(dir); !slices.Equal(left, []string{ws}) {
		t.Fatalf("unmountLeft = %v", left)
	}
	if got := serverMountsUnder(dir); len(got) != 0 {
		t.Fatalf("still mounted after unmountLeft: %v", got)
	}
}

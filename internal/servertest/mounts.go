package servertest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/carryover/carryover/kernel/sandbox"
)

// serverMountsUnder lists the loop mounts the server made under dir, deepest first: mount points
// below dir (not dir itself: a test may mount the whole directory, a small disk, say) whose loop
// device's image is a file under dir too (the server's workspace disks, data_dir/disks/*.img).
func serverMountsUnder(dir string) []string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		point, source, ok := mountOf(line)
		if !ok || !strings.HasPrefix(point, abs+"/") {
			continue
		}
		n, ok := strings.CutPrefix(source, "/dev/loop")
		if !ok {
			continue
		}
		img, err := os.ReadFile("/sys/block/loop" + n + "/loop/backing_file")
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(img)), abs+"/") {
			out = append(out, point)
		}
	}
	slices.Reverse(out) // mountinfo lists parents first
	return out
}

// mountOf reads a mountinfo line's mount point and source (the field after the fs type, past " - ").
func mountOf(line string) (point, source string, ok bool) {
	f := strings.Fields(line)
	sep := slices.Index(f, "-")
	if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
		return "", "", false
	}
	return sandbox.UnescapeMount(f[4]), f[sep+2], true
}

// unmountLeft detaches what the server left mounted under dir (a process killed -9 unmounts
// nothing; its successor would, at start) and returns the mount points it found.
func unmountLeft(dir string) []string {
	left := serverMountsUnder(dir)
	for _, p := range left {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
	return left
}

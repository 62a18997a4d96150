package servertest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	return UnescapeMount(f[4]), f[sep+2], true
}

// UnescapeMount undoes /proc/self/mountinfo's octal escapes (\040 for a space, ...): a mount point
// under a directory with a space in its path is still found (this package's and the bench's
// clean-ups of what a killed server left mounted).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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

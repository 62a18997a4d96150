package servertest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// mountsUnder lists the mount points at or under dir in this process's mount namespace (the
// server's workspace disks are loop mounts it makes there), deepest first.
func mountsUnder(dir string) []string {
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
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMount(f[4])
		if p == abs || strings.HasPrefix(p, abs+"/") {
			out = append(out, p)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 { // mountinfo lists parents first
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
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
	left := mountsUnder(dir)
	for _, p := range left {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
	return left
}

package bench

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/carryover/carryover/kernel/sandbox"
	"golang.org/x/sys/unix"
)

// removeScratch removes the run's scratch dir. A node the failover rows SIGKILLed leaves its mounts
// under it (its kernels' runtime dirs, /tmp, a spare disk image), which no later start of that node
// detaches: they are detached here first, deepest first, so nothing of the run stays mounted.
func removeScratch(dir string) {
	for _, m := range mountsUnder(dir) {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
	_ = os.RemoveAll(dir)
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := sandbox.UnescapeMount(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

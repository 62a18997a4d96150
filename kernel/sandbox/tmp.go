package sandbox

// tmp.go gives a box its /tmp as a tmpfs the manager mounts itself (in the box's dir, bound at /tmp
// by bubblewrap) rather than bubblewrap's --tmpfs: bubblewrap can set a tmpfs's size but not its
// nr_inodes, and without an inode cap a session could fill the host's memory with empty files (each
// inode costs kernel memory outside the size cap). The pages are still charged to the writer's
// memory cgroup, as with bubblewrap's tmpfs. /var/tmp is a link to it; /dev/shm stays bubblewrap's.

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// tmpMount is the name of the box's /tmp among its mounts (b.mounts); not bound under /run/carryover.
const tmpMount = "tmp"

// mountTmp mounts the box's /tmp tmpfs (size TmpSize, TmpInodes inodes; 0: the kernel's default).
func (b *Box) mountTmp() error {
	dir := filepath.Join(b.dir, tmpMount)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	opts := fmt.Sprintf("size=%d,mode=1777", b.m.cfg.TmpSize)
	if b.m.cfg.TmpInodes > 0 {
		opts += fmt.Sprintf(",nr_inodes=%d", b.m.cfg.TmpInodes)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("sandbox: mount /tmp tmpfs (%s): %w", opts, err)
	}
	b.mu.Lock()
	b.mounts[tmpMount] = "tmpfs"
	b.mu.Unlock()
	return nil
}

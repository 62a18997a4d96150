package sandbox

// uids.go hands out the sandbox uids: one per box, exclusive across the servers of a host.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// allocUID takes a free uid of the range (next-fit, so a just-released uid is reused last).
// A uid is ours while we hold an flock on its lock file: other carryover servers on the host (or
// other Managers in this process) skip it, and a crashed server's locks vanish with it.
func (m *Manager) allocUID() (int, error) {
	for i := 0; i < m.cfg.UIDCount; i++ {
		off := (m.next + i) % m.cfg.UIDCount
		uid := m.cfg.UIDBase + off
		if m.uids[uid] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(m.cfg.LockDir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return 0, fmt.Errorf("sandbox: uid lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue // another server's
		}
		m.uids[uid] = f
		m.next = off + 1
		return uid, nil
	}
	return 0, fmt.Errorf("sandbox: all %d sandbox uids are in use", m.cfg.UIDCount)
}

func (m *Manager) freeUID(uid int) {
	if f := m.uids[uid]; f != nil {
		f.Close() // drops the flock
	}
	delete(m.uids, uid)
	// Mounts hold their own reference to the idmap; the cached namespace fd is only for new mounts.
	if fd, ok := m.userns[uid]; ok {
		_ = unix.Close(fd)
		delete(m.userns, uid)
	}
}

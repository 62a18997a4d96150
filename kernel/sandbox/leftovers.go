package sandbox

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// sweepLeftovers kills the processes still running under a uid of the range that no server holds
// (its lock file is not flock'ed): what a server that died left behind. A server killed while a box
// was starting left one in `make bench`: bubblewrap's inner process (the pid namespace's init, root)
// reparented to init, and the kernel under it, running for ever; most likely the window between
// bubblewrap cloning that process and the process setting its parent-death signal. Killing the
// uid's processes ends the kernel, and with it that init. Boxes of live servers (this process's
// other Managers included: flocks are per open file) are skipped. Called once, when the Manager is
// made.
func (m *Manager) sweepLeftovers() {
	killed, uids := 0, 0
	for uid, pids := range pidsByUID(m.inRange) {
		f, err := os.OpenFile(filepath.Join(m.cfg.LockDir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			uids++
			for _, p := range pids {
				if unix.Kill(p, unix.SIGKILL) == nil {
					killed++
				}
			}
		}
		f.Close() // drops the flock, if taken
	}
	if killed > 0 {
		m.log.Warn("sandbox: killed processes a stopped server left running under sandbox uids", "processes", killed, "uids", uids)
	}
}

func (m *Manager) inRange(uid int) bool {
	return uid >= m.cfg.UIDBase && uid < m.cfg.UIDBase+m.cfg.UIDCount
}

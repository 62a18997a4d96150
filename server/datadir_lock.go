package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/server/session"
)

// lockName is the file in data_dir whose flock marks the data dir as in use.
const lockName = "carryover.lock"

// dataDirLock is the exclusive lock a server holds on its data_dir for its whole life. Two servers on
// one data dir would each write the sessions, workspaces and kernels' state dirs from their own
// memory and overwrite each other's (found when a second carryover started while the first was still
// in its shutdown grace). The lock is an flock on an open file: the kernel drops it when the process
// dies, kill -9 included, so a crash never leaves a stale lock behind.
type dataDirLock struct{ f *os.File }

// claimDataDir makes data_dir, locks it for this server and prepares the directories under it.
func claimDataDir(cfg *configs.Config) (*dataDirLock, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := session.PrepareDirs(sessionConfig(cfg)); err != nil {
		lock.release()
		return nil, err
	}
	return lock, nil
}

// lockDataDir takes the lock, or says which process holds it.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) // close-on-exec: kernels do not inherit it
	if err != nil {
		return nil, fmt.Errorf("data_dir lock: %w", err)
	}
	if err := flockWait(f, lockWait); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			holder = "process " + strings.TrimSpace(string(b))
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, carryover.Errorf(carryover.CodeConflict,
				"data_dir %s is in use by another carryover (%s, per %s): two servers on one data dir would overwrite each other's sessions; stop that one or choose another data_dir",
				dir, holder, path)
		}
		return nil, fmt.Errorf("data_dir lock %s: %w", path, err)
	}
	// The pid is only for the message above; the flock is the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// lockWait is how long a lock held elsewhere is retried before the conflict is reported. A lock
// just released can stay held for a moment: an flock belongs to the open file, and every child that
// this process (or the server that just exited) forks holds a copy of each descriptor, close-on-exec
// ones included, until its exec closes them; under load that is milliseconds or more. A server
// restarted in-process (the tests, an embedder) was refused now and then by the lock of its own
// predecessor, held by a child (a kernel, bwrap) that another server of the process was starting.
const lockWait = 2 * time.Second

// flockWait takes an exclusive flock on f, retrying for up to wait while another holds it.
func flockWait(f *os.File, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// release drops the lock; safe on nil and twice.
func (l *dataDirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Close()
	l.f = nil
}

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover/internal/sandboxtest"
)

// TestNewKillsLeftovers: a new Manager kills what a dead server left running under a uid of its
// range (nobody holds the uid's lock), and leaves alone a uid another server holds.
func TestNewKillsLeftovers(t *testing.T) {
	sandboxtest.Require(t, Probe)
	lockDir := t.TempDir()
	const base = 239000
	asUID := func(uid int) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(uid), "--clear-groups", "sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		for deadline := time.Now().Add(10 * time.Second); procUID(cmd.Process.Pid) != uid; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d never ran as uid %d", cmd.Process.Pid, uid)
			}
		}
		return cmd
	}
	// A live server's uid: its lock is held.
	held, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(base+4)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := unix.Flock(int(held.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	owned := asUID(base + 4)
	left := asUID(base + 3)
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()

	newManager(t, func(c *Config) { c.UIDBase, c.UIDCount, c.LockDir = base, 10, lockDir })
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the leftover ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover process of a free uid is still running")
	}
	if procUID(owned.Process.Pid) != base+4 {
		t.Fatal("the process of a uid another server holds was killed")
	}
}

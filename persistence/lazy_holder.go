package persistence

import (
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The holder is a small process outside the box (lazy_holder.py) that keeps a duplicate of every
// lazy fill's userfaultfd until its kernel exits. Without it, a kill -9 of the server mid-fill
// would release the userfaultfd before the kernel's parent-death signal lands, and a thread of the
// kernel waiting on a page not filled yet would read zeros there for those microseconds.
//
//go:embed lazy_holder.py
var holderScript string

var holder struct {
	once sync.Once
	mu   sync.Mutex
	conn *net.UnixConn
	err  error
}

// DefaultHolderPython runs the holder when Checkpointer.Python is not set.
const DefaultHolderPython = "/usr/bin/python3"

// hold hands the holder duplicates of uffd and pidfd (the kernel's), starting it on first use.
func (c *Checkpointer) hold(uffd *os.File, pidfd int) error {
	holder.once.Do(func() {
		py := c.Python
		if py == "" {
			py = DefaultHolderPython
		}
		holder.conn, holder.err = startHolder(py)
	})
	if holder.err != nil {
		return holder.err
	}
	rc, err := uffd.SyscallConn()
	if err != nil {
		return err
	}
	holder.mu.Lock()
	defer holder.mu.Unlock()
	var werr error
	if err := rc.Control(func(fd uintptr) {
		_, _, werr = holder.conn.WriteMsgUnix([]byte{'h'}, unix.UnixRights(int(fd), pidfd), nil)
	}); err != nil {
		return err
	}
	return werr
}

// startHolder runs lazy_holder.py with one end of a SOCK_SEQPACKET pair as its fd 3. It is in a
// process group of its own and gets no parent-death signal: it must outlive the server's kernels.
func startHolder(python string) (*net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("userfaultfd holder: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "holder"), os.NewFile(uintptr(fds[1]), "holder")
	defer theirs.Close()
	defer mine.Close()
	cmd := exec.Command(python, "-I", "-c", holderScript) // -I: nothing from the cwd or user site
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("userfaultfd holder: %w", err)
	}
	go cmd.Wait()
	fc, err := net.FileConn(mine)
	if err != nil {
		return nil, fmt.Errorf("userfaultfd holder: %w", err)
	}
	return fc.(*net.UnixConn), nil
}

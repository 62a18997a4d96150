package sandbox

// netns.go gives a box with an egress allowlist its network namespace before bubblewrap runs: the
// server (root) makes a namespace with only loopback, opens the proxy's listening socket inside it,
// and starts the box's wrapper from a thread that is in it, so bubblewrap (told not to unshare the
// network) and everything below run there. A socket belongs to the namespace it was made in, so
// the server serves the proxy from its own goroutines while the box can reach nothing else: no
// veth, no routes, no in-box forwarder process, and the listener exists before the box's first
// program does (no start-up race for an exec command's first connection).

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// netns is a network namespace held open by a file descriptor.
type netns struct{ f *os.File }

// inNetns runs fn on a locked OS thread that is in ns (nil: runs fn as is). Processes fn starts are
// born in ns. When the thread cannot return to the server's namespace it is left locked, and the
// Go runtime ends it instead of reusing it (killing, through their parent-death signal, the boxes
// it started: better than a server thread stuck in a box's namespace; setns back does not fail for
// root).
func inNetns(ns *netns, fn func() error) error {
	if ns == nil {
		return fn()
	}
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer own.Close()
	if err := unix.Setns(int(ns.f.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns: %w", err)
	}
	ferr := fn()
	if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
		runtime.UnlockOSThread()
	}
	return ferr
}

// newNetns makes a namespace with loopback up and returns it with a TCP listener on
// 127.0.0.1:port inside it.
func newNetns(port int) (*netns, net.Listener, error) {
	// The thread goes back to the server's namespace and is unlocked, never left to die: a process
	// started earlier from this thread (bubblewrap's --die-with-parent is a parent-death signal,
	// and the parent is the thread that forked) would be killed with it.
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, nil, fmt.Errorf("sandbox: network namespace: %w", err)
	}
	defer own.Close()
	var f *os.File
	var l net.Listener
	err = func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		if f, err = os.Open("/proc/thread-self/ns/net"); err != nil {
			return err
		}
		if err := loopbackUp(); err != nil {
			return err
		}
		l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		return err
	}()
	if rerr := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); rerr == nil {
		runtime.UnlockOSThread()
	} else {
		err = errors.Join(err, fmt.Errorf("back to the server's namespace: %w", rerr))
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		if l != nil {
			l.Close()
		}
		return nil, nil, fmt.Errorf("sandbox: network namespace: %w", err)
	}
	return &netns{f: f}, l, nil
}

// loopbackUp sets IFF_UP on lo of the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

func (ns *netns) close() error {
	if ns == nil {
		return nil
	}
	return errors.Join(ns.f.Close())
}

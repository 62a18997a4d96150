package persistence

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A lazy restore maps a large buffer at once and fills it in the background, chunk by chunk, the
// chunk a thread touches first (E2B's resume does the same with userfaultfd). The kernel process
// creates a userfaultfd from the /dev/userfaultfd descriptor the server lends it, registers the
// buffers' anonymous mappings for missing pages (and for asynchronous write-protect, which the dirty
// tracker scans), and hands it back; the server copies each chunk in with UFFDIO_COPY. A thread that
// touches a page not filled yet, from user code or inside a system call, waits for its chunk: a
// value is never observed half-restored. Only a kernel no user code has run in is given the
// device (a wake: a claimed kernel, before the restore), and it closes both descriptors before the
// restore's first unpickle; the server holds the userfaultfd until the kernel exits, and the holder
// (lazy_holder.go) a duplicate, so not even a kill -9 of the server releases it under a live kernel.

// lazyBufferMin is the size from which a buffer is restored lazily.
var lazyBufferMin atomic.Int64

func init() { lazyBufferMin.Store(64 << 20) }

// lazyRef says buffer J of a group is the agent's lazily mapped buffer ID.
type lazyRef struct {
	J  int `json:"j"`
	ID int `json:"id"`
}

// lazyBuf is a buffer planned for a lazy restore: which group's which buffer, its chunks.
type lazyBuf struct {
	group, j int
	n        int64
	chunks   []descChunk
}

// lazyEligible: large, its chunks hold its length, and every chunk but the last is whole pages (a
// chunk is copied in at its offset, which must be page-aligned).
func lazyEligible(b descBuffer, pageSize int) bool {
	if b.Len < lazyBufferMin.Load() || chunksLen(b.Chunks) != b.Len {
		return false
	}
	for i, ch := range b.Chunks {
		if i < len(b.Chunks)-1 && ch.Len%int64(pageSize) != 0 {
			return false
		}
	}
	return true
}

// lazyMapped is what the agent answers for one buffer: where it mapped it.
type lazyMapped struct {
	ID   int     `json:"id"`
	Addr uintptr `json:"addr"`
	Len  int64   `json:"len"`
}

// startLazy has the agent map the lazy buffers (its "lazy_map" call, with the device lent over a
// unix socket in the spool) and starts their fill. On an error nothing is mapped for the restore
// to use: the caller assembles those buffers as files instead.
func (c *Checkpointer) startLazy(ctx context.Context, ex Executor, hostDir, kernDir string, bufs []lazyBuf) error {
	dev, err := uffdDevice()
	if err != nil {
		return fmt.Errorf("lazy restore unavailable: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(hostDir, "lazy.sock"), Net: "unix"})
	if err != nil {
		return fmt.Errorf("lazy restore: %w", err)
	}
	defer ln.Close()
	type shake struct {
		conn   *net.UnixConn
		uffd   *os.File
		mapped []lazyMapped
		err    error
	}
	got := make(chan shake, 1)
	go func() {
		var s shake
		s.conn, s.uffd, s.mapped, s.err = lendDevice(ln, dev)
		got <- s
	}()
	want := make([]map[string]any, len(bufs))
	for i, b := range bufs {
		want[i] = map[string]any{"id": i, "n": b.n}
	}
	var ans struct {
		OK bool `json:"ok"`
	}
	callErr := callAgent(ctx, ex, "lazy_map", map[string]any{"sock": filepath.Join(kernDir, "lazy.sock"), "bufs": want}, &ans)
	ln.Close() // unblocks an accept the agent never made
	s := <-got
	if callErr == nil && s.err == nil {
		s.err = checkMapped(s.mapped, bufs)
	}
	if err := errors.Join(callErr, s.err); err != nil {
		if s.uffd != nil {
			s.uffd.Close()
		}
		if s.conn != nil {
			s.conn.Close()
		}
		return fmt.Errorf("lazy restore: %w", err)
	}
	f := newLazyFill(c.Store, s.uffd, s.conn, bufs, s.mapped, os.Getpagesize())
	if f.pidfd >= 0 {
		if err := c.hold(s.uffd, f.pidfd); err != nil {
			holderWarn.Do(func() {
				slog.Warn("lazy restore without the userfaultfd holder: a kill -9 of the server mid-fill could show a dying kernel zeros", "err", err)
			})
		}
	}
	go f.run(context.WithoutCancel(ctx))
	return nil
}

var holderWarn sync.Once

// lendDevice accepts the agent's connection, lends it the device and reads back its userfaultfd
// and where it mapped each buffer.
func lendDevice(ln *net.UnixListener, dev *os.File) (*net.UnixConn, *os.File, []lazyMapped, error) {
	if err := ln.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return nil, nil, nil, err
	}
	conn, err := ln.AcceptUnix()
	if err != nil {
		return nil, nil, nil, err
	}
	if _, _, err := conn.WriteMsgUnix([]byte{'F'}, unix.UnixRights(int(dev.Fd())), nil); err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	defer conn.SetReadDeadline(time.Time{})
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	fd, err := oneRight(oob[:oobn])
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	unix.SetNonblock(fd, true) // read through the runtime's poller, which Close interrupts
	uffd := os.NewFile(uintptr(fd), "userfaultfd")
	var mapped []lazyMapped
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(append(buf, line...), &mapped)
	}
	if err != nil {
		uffd.Close()
		conn.Close()
		return nil, nil, nil, fmt.Errorf("the agent's mappings: %w", err)
	}
	return conn, uffd, mapped, nil
}

// oneRight is the single descriptor a control message carries.
func oneRight(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, err
	}
	var fds []int
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, r...)
		}
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("the agent sent %d descriptors, want 1", len(fds))
	}
	return fds[0], nil
}

// checkMapped: one mapping per buffer, each at least the buffer's length.
func checkMapped(mapped []lazyMapped, bufs []lazyBuf) error {
	if len(mapped) != len(bufs) {
		return fmt.Errorf("the agent mapped %d buffers, want %d", len(mapped), len(bufs))
	}
	for i, m := range mapped {
		if m.ID != i || m.Len < bufs[i].n || m.Addr == 0 {
			return fmt.Errorf("the agent's mapping %+v does not hold buffer %d (%d bytes)", m, i, bufs[i].n)
		}
	}
	return nil
}

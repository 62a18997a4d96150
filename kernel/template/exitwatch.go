package template

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

var errWatchClosed = errors.New("exit watch closed")

// exitWatch tells when processes that are not the server's children exit: a pidfd of each (it
// becomes readable when the process exits) in one epoll set, waited on by one goroutine, so a
// hundred kernels cost one blocked thread, not a hundred.
type exitWatch struct {
	once sync.Once
	err  error
	epfd int
	wake [2]int // a pipe in the set: close writes it to end the loop

	mu     sync.Mutex
	waits  map[int32]func() // pidfd -> told once its process exited
	closed bool
	done   chan struct{} // closed when the loop ended (nil: it never ran)
}

// watch calls fn once pid has exited (at once when it is gone already).
func (w *exitWatch) watch(pid int, fn func()) error {
	w.once.Do(w.start)
	if w.err != nil {
		return w.err
	}
	fd, err := unix.PidfdOpen(pid, 0) // close-on-exec
	if errors.Is(err, unix.ESRCH) {
		go fn()
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		_ = unix.Close(fd)
		return errWatchClosed
	}
	w.waits[int32(fd)] = fn
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		delete(w.waits, int32(fd))
		_ = unix.Close(fd)
		return fmt.Errorf("epoll pidfd of %d: %w", pid, err)
	}
	return nil
}

func (w *exitWatch) start() {
	w.waits = map[int32]func(){}
	if w.epfd, w.err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); w.err != nil {
		return
	}
	if w.err = unix.Pipe2(w.wake[:], unix.O_CLOEXEC); w.err != nil {
		_ = unix.Close(w.epfd)
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(w.wake[0])}
	if w.err = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, w.wake[0], &ev); w.err != nil {
		_ = unix.Close(w.epfd)
		return
	}
	w.done = make(chan struct{})
	go w.loop()
}

// close ends the loop and releases its fds; processes still watched are no longer told of.
func (w *exitWatch) close() {
	w.once.Do(func() { w.err = errWatchClosed }) // never started: nothing to release
	w.mu.Lock()
	w.closed = true
	done := w.done
	w.mu.Unlock()
	if done == nil {
		return
	}
	_, _ = unix.Write(w.wake[1], []byte{0})
	<-done
	w.mu.Lock()
	defer w.mu.Unlock()
	for fd := range w.waits {
		_ = unix.Close(int(fd))
	}
	w.waits = map[int32]func(){}
	_ = unix.Close(w.wake[0])
	_ = unix.Close(w.wake[1])
	_ = unix.Close(w.epfd)
}

// loop waits for exits until close.
func (w *exitWatch) loop() {
	defer close(w.done)
	events := make([]unix.EpollEvent, 32)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == int32(w.wake[0]) {
				return
			}
			w.mu.Lock()
			fn := w.waits[ev.Fd]
			delete(w.waits, ev.Fd)
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
			_ = unix.Close(int(ev.Fd))
			w.mu.Unlock()
			if fn != nil {
				go fn()
			}
		}
	}
}

package template

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// exitWatch tells when processes that are not the server's children exit: a pidfd of each (it
// becomes readable when the process exits) in one epoll set, waited on by one goroutine, so a
// hundred kernels cost one blocked thread, not a hundred.
type exitWatch struct {
	once  sync.Once
	err   error
	epfd  int
	mu    sync.Mutex
	waits map[int32]func() // pidfd -> told once its process exited
}

// watch calls fn once pid has exited (at once when it is gone already).
func (w *exitWatch) watch(pid int, fn func()) error {
	w.once.Do(w.start)
	if w.err != nil {
		return w.err
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		go fn()
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	w.mu.Lock()
	w.waits[int32(fd)] = fn
	w.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		w.mu.Lock()
		delete(w.waits, int32(fd))
		w.mu.Unlock()
		_ = unix.Close(fd)
		return fmt.Errorf("epoll pidfd of %d: %w", pid, err)
	}
	return nil
}

func (w *exitWatch) start() {
	w.waits = map[int32]func(){}
	w.epfd, w.err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if w.err == nil {
		go w.loop()
	}
}

// loop runs for the life of the process (one watcher per Provisioner, which servers keep).
func (w *exitWatch) loop() {
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
			w.mu.Lock()
			fn := w.waits[ev.Fd]
			delete(w.waits, ev.Fd)
			w.mu.Unlock()
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
			_ = unix.Close(int(ev.Fd))
			if fn != nil {
				go fn()
			}
		}
	}
}

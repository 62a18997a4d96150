//go:build linux || darwin

package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// errSentWhileIdle is an idle connection that has something to read: a server says nothing to an
// idle client but for a FATAL message before it closes (pg_terminate_backend, a shutdown).
var errSentWhileIdle = errors.New("the server sent a message to an idle connection")

// discardDead is the pool's check of a connection before it hands it out again: a connection the
// server terminated or closed while it was idle is dropped (driver.ErrBadConn: database/sql takes
// another one, or opens one) instead of failing the statement about to be sent. It costs a
// non-blocking peek at the socket, no round trip (a ping per statement would cost one).
func discardDead(ctx context.Context, c *pgx.Conn) error {
	pc := c.PgConn()
	if err := pc.SyncConn(ctx); err != nil { // no-op unless pgx holds unread bytes (then a ping)
		return driver.ErrBadConn
	}
	if err := peekSocket(pc.Conn()); err != nil {
		return driver.ErrBadConn // database/sql closes it
	}
	return nil
}

// peekSocket reports what a non-blocking read of c would find without consuming it: nil when there
// is nothing to read yet (an idle connection), io.EOF when the peer closed, errSentWhileIdle when
// bytes wait, or the socket's error (a reset). A connection that is not a socket (TLS) is not
// looked at: nil.
func peekSocket(c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var n int
	var rerr error
	var b [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // one look, never a wait
	}); err != nil {
		return err
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK) || errors.Is(rerr, syscall.EINTR):
		return nil
	case rerr != nil:
		return rerr
	case n == 0:
		return io.EOF
	}
	return errSentWhileIdle
}

package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"net"
	"reflect"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A connection of the pool can die under the store: an administrator's pg_terminate_backend, a
// restart or failover of PostgreSQL, a network reset. database/sql retries a statement on another
// connection only when the driver says nothing was sent (driver.ErrBadConn), and pgx finds a
// connection terminated while idle only when it reads the reply to the next statement: without the
// two defences below, one such event fails the next statement of every idle pooled connection.
//
//   - The pool drops a dead idle connection before handing it out (discardDead): a terminated
//     backend has sent its FATAL message and closed its end, which a non-blocking peek at the socket
//     sees without a round trip.
//   - What still fails on a lost connection (it died between that peek and the reply) is run again
//     on another connection when running it twice cannot do anything twice (retryLost): a
//     transaction that failed before its COMMIT was sent (the server rolled it back), a read, a
//     write that sets what it sets. A failed COMMIT, or an autocommit write that is not idempotent,
//     has an unknown outcome and returns its error, as before.

// connLost reports whether err means the statement's connection was lost (terminated, closed or
// reset), so that the statement did not complete on it; a context's end and every error of the
// statement itself (constraints, syntax, a statement timeout's 57014) are not.
func connLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", // admin_shutdown: pg_terminate_backend, or a fast/smart shutdown
			"57P02", // crash_shutdown: another backend crashed and the server is resetting
			"57P03", // cannot_connect_now: the server is starting or shutting down (a restart)
			"57P05", // idle_session_timeout: the server closed a connection idle too long
			"25P03": // idle_in_transaction_session_timeout: the server ended a stalled transaction's session
			return true
		}
		return len(pe.Code) == 5 && pe.Code[:2] == "08" // connection_exception and its subclasses
	}
	var ce *pgconn.ConnectError
	return pgconn.SafeToRetry(err) || // pgx sent nothing (a closed connection's lock error among them)
		errors.As(err, &ce) || // no new connection either (PostgreSQL restarting): worth a short wait
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}

// lostBackoff is the wait before each retry of retryLost: the first on another connection at once
// (an idle connection killed), the later ones giving a restarting server a moment.
var lostBackoff = []time.Duration{0, 20 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond}

// lostLogEvery is the least time between two log lines about lost connections: one per burst (a
// kill of every connection fails many statements at once), not one per statement.
const lostLogEvery = 10 * time.Second

// retryLost runs op, and again while it fails with retry set (op decides: see connLost and the
// comment at the top of this file), at most len(lostBackoff) more times and while ctx lasts. The
// error is op's last.
func (s *Store) retryLost(ctx context.Context, op func() (retry bool, err error)) error {
	retry, err := op()
	for _, wait := range lostBackoff {
		if err == nil || !retry || ctx.Err() != nil {
			return err
		}
		s.lostRetries.Add(1)
		s.logLost(err)
		s.dropIdle()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		retry, err = op()
	}
	return err
}

// logLost logs a lost connection once per lostLogEvery.
func (s *Store) logLost(err error) {
	now := time.Now().UnixNano()
	last := s.lostLogged.Load()
	if now-last < int64(lostLogEvery) || !s.lostLogged.CompareAndSwap(last, now) {
		return
	}
	slog.Info("postgres: a connection was lost; retrying on another (logged once per burst)", "err", err)
}

// dropIdle closes the pool's idle connections: when one connection was lost, the others idle
// beside it most likely were too (a restart, a failover and an administrator's kill end them all),
// and a retry should not meet them one by one. In-use connections are not touched.
func (s *Store) dropIdle() {
	s.db.SetMaxIdleConns(0)
	s.db.SetMaxIdleConns(s.opts.MaxConns)
}

// read runs a read-only fn, again on another connection when its connection was lost.
func (s *Store) read(ctx context.Context, fn func() error) error {
	return s.retryLost(ctx, func() (bool, error) {
		err := fn()
		return connLost(err), err
	})
}

// get is GetContext, retried as a read.
func (s *Store) get(ctx context.Context, dest any, query string, args ...any) error {
	return s.read(ctx, func() error { return s.db.GetContext(ctx, dest, query, args...) })
}

// sel is SelectContext, retried as a read; dest (a pointer to a slice, which sqlx appends to) is
// emptied before each attempt, so a half-read first attempt leaves no rows behind.
func (s *Store) sel(ctx context.Context, dest any, query string, args ...any) error {
	return s.read(ctx, func() error {
		clearSlice(dest)
		return s.db.SelectContext(ctx, dest, query, args...)
	})
}

// execSame runs a write that leaves the same state however often it runs (an UPDATE setting given
// values, a DELETE, an INSERT ... ON CONFLICT DO NOTHING), again on another connection when its
// connection was lost: whether the lost attempt took effect or not, the retry's outcome is the
// statement's.
func (s *Store) execSame(ctx context.Context, query string, args ...any) (n int64, err error) {
	err = s.retryLost(ctx, func() (bool, error) {
		res, err := s.db.ExecContext(ctx, query, args...)
		if err != nil {
			return connLost(err), err
		}
		n, err = res.RowsAffected()
		return false, err
	})
	return n, err
}

// clearSlice sets *dest to nil when dest points to a slice.
func clearSlice(dest any) {
	if v := reflect.ValueOf(dest); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Slice {
		v.Elem().Set(reflect.Zero(v.Elem().Type()))
	}
}

package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"
)

// TestConnLost pins the classification: a lost connection is retried, a statement's own failure and
// the caller's context are not.
func TestConnLost(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("update session: %w", &pgconn.PgError{Severity: "FATAL", Code: code})
	}
	for _, c := range []struct {
		err  error
		lost bool
	}{
		{nil, false},
		{pg("57P01"), true}, // pg_terminate_backend
		{pg("57P02"), true},
		{pg("57P03"), true},
		{pg("57P05"), true},
		{pg("08006"), true},
		{pg("08000"), true},
		{pg("23505"), false}, // unique violation: the statement's own
		{pg("57014"), false}, // statement timeout / cancel
		{pg("40001"), false}, // serialization failure: not a connection's
		{pg("0"), false},
		{fmt.Errorf("read: %w", io.EOF), true},
		{io.ErrUnexpectedEOF, true},
		{net.ErrClosed, true},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{syscall.EPIPE, true},
		{syscall.ECONNREFUSED, true},
		{driver.ErrBadConn, true},
		{fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{&pgconn.ConnectError{}, true},
		{context.Canceled, false},
		{fmt.Errorf("begin: %w: %w", context.DeadlineExceeded, io.EOF), false}, // the caller gave up
		{errors.New("session not found"), false},
	} {
		if got := connLost(c.err); got != c.lost {
			t.Errorf("connLost(%v) = %v, want %v", c.err, got, c.lost)
		}
	}
}

// TestRetryLost: op runs again while it says so, at most 1+len(lostBackoff) times, and not once ctx
// has ended.
func TestRetryLost(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("pgx", "postgres://127.0.0.1:1/none") // never connects: only its pool is dropped
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &Store{db: db, opts: Options{MaxConns: 1}}
	lost := &pgconn.PgError{Code: "57P01"}
	runs := 0
	err = s.retryLost(context.Background(), func() (bool, error) { runs++; return true, lost })
	if runs != 1+len(lostBackoff) || !errors.Is(err, lost) {
		t.Fatalf("always lost: %d runs, err %v", runs, err)
	}
	runs = 0
	err = s.retryLost(context.Background(), func() (bool, error) {
		runs++
		if runs < 3 {
			return true, lost
		}
		return false, nil
	})
	if runs != 3 || err != nil {
		t.Fatalf("lost twice: %d runs, err %v", runs, err)
	}
	runs = 0
	err = s.retryLost(context.Background(), func() (bool, error) { runs++; return false, lost })
	if runs != 1 {
		t.Fatalf("op said no retry: %d runs, err %v", runs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runs = 0
	err = s.retryLost(ctx, func() (bool, error) { runs++; cancel(); return true, lost })
	if runs != 1 || !errors.Is(err, lost) {
		t.Fatalf("ctx ended: %d runs, err %v", runs, err)
	}
}

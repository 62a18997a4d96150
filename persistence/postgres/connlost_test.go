package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/jmoiron/sqlx"
)

// terminateOthers ends every backend of the store's database but the caller's, as an administrator
// (or the chaos harness's pg-kill-conns) does, and waits until they are gone (polling: the wait of
// pg_terminate_backend(pid, timeout) sleeps 100 ms per backend).
func terminateOthers(t testing.TB, admin *sql.DB) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND datname = current_database()) k`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		var left int
		if err := admin.QueryRow(`SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND datname = current_database()`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still there 10 s after pg_terminate_backend", left)
		}
	}
}

// adminT is a connection of its own to the database of dsn.
func adminT(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	return admin
}

// warmPool runs n statements at once, twice, so that n connections sit idle in the store's pool,
// each used again within the last second (pgx pings a connection idle for longer, or never reused,
// before handing it out). The statements' own errors are not the test's: a previous round's dead
// connections may answer them.
func warmPool(t testing.TB, s *Store, n int) {
	t.Helper()
	for range 2 {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { s.db.Exec(`SELECT pg_sleep(0.02)`) })
		}
		wg.Wait()
	}
	if idle := s.db.Stats().Idle; idle < n/2 {
		t.Fatalf("%d connections idle after warming, want >= %d", idle, n/2)
	}
}

// TestTerminatedConnections: after every connection of the store's warm pool is terminated (an
// administrator's pg_terminate_backend, a failover or restart of PostgreSQL), each operation a turn
// makes succeeds on a new connection: none answers the terminated one's FATAL 57P01. With the pool's
// check of an idle connection (discardDead), every operation; with the retries alone (the
// connection died between that check and the reply), every operation that may run twice, and the
// append of an event (which may not) either succeeds or fails, but is never stored twice.
func TestTerminatedConnections(t *testing.T) {
	t.Parallel()
	t.Run("pool check", func(t *testing.T) { t.Parallel(); terminatedConnections(t, false) })
	t.Run("retries alone", func(t *testing.T) { t.Parallel(); terminatedConnections(t, true) })
}

func terminatedConnections(t *testing.T, retriesAlone bool) {
	dsn := pgtest.NewDB(t)
	s, err := Open(context.Background(), dsn, Options{noPoolCheck: retriesAlone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	admin := adminT(t, dsn)
	ctx := context.Background()
	sessionT(t, s, "k")
	appended := 0
	ops := []struct {
		name string
		once bool // may not run twice: retried only with the pool check
		do   func(round int) error
	}{
		{"get session", false, func(int) error { _, err := s.GetSession(ctx, "k"); return err }},
		{"update session", false, func(round int) error {
			return s.UpdateSession(ctx, carryover.SessionRecord{ID: "k", State: "running", ClientID: fmt.Sprint(round)})
		}},
		{"append event", true, func(int) error {
			_, err := s.AppendEvent(ctx, "k", "turn", map[string]int{"n": 1})
			if err == nil {
				appended++
			}
			return err
		}},
		{"list events", false, func(int) error { _, err := s.ListEvents(ctx, "k", carryover.EventQuery{}); return err }},
		{"checkpoint", false, func(round int) error { return putCheckpoint(ctx, s, "k", fmt.Sprint("c", round)) }},
		{"latest checkpoint", false, func(int) error { _, err := s.LatestCheckpoint(ctx, "k"); return err }},
		{"reserve idempotency key", false, func(round int) error {
			now := time.Now()
			_, _, err := s.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "k", Key: fmt.Sprint("key", round),
				Fingerprint: "f", Attempt: "a", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
			return err
		}},
	}
	for round := range 2 {
		warmPool(t, s, 8)
		if n := terminateOthers(t, admin); n < 4 {
			t.Fatalf("round %d: %d backends terminated, want the warm pool's", round, n)
		}
		for i, op := range ops {
			if retriesAlone && op.once {
				op.do(round)
				continue
			}
			if retriesAlone && i > 0 { // each operation first on a dead connection
				warmPool(t, s, 4)
				terminateOthers(t, admin)
			}
			if err := op.do(round); err != nil {
				t.Errorf("round %d: %s after the pool's connections were terminated: %v", round, op.name, err)
			}
		}
	}
	evs, err := s.ListEvents(ctx, "k", carryover.EventQuery{})
	if err != nil || len(evs) != appended || !retriesAlone && appended != 2 || retriesAlone && s.lostRetries.Load() == 0 {
		t.Fatalf("%d events stored (err %v), %d appends answered, %d retries (retries alone: %v)", len(evs), err, appended,
			s.lostRetries.Load(), retriesAlone)
	}
}

// putCheckpoint writes checkpoint id of sid through the normal path: a writer, a put, a commit.
func putCheckpoint(ctx context.Context, s *Store, sid, id string) error {
	w, err := s.BeginCheckpoint(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	c := rawChunk([]byte("chunk of " + id))
	if _, err := w.PutChunks(ctx, []carryover.ChunkInput{c}); err != nil {
		return err
	}
	return w.Commit(ctx, carryover.Checkpoint{ID: id, SessionID: sid, Roots: []string{c.Hash}})
}

// killBackend terminates the backend serving tx (from admin) and waits until it is gone.
func killBackend(t testing.TB, admin *sql.DB, tx *sqlx.Tx) {
	t.Helper()
	var pid int
	if err := tx.Get(&pid, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := admin.QueryRow(`SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate backend %d: %v %v", pid, ok, err)
	}
}

// storeWithRuns is a store on a new database with a table runs (n INT) for a tx's work, and an
// administrator's connection to terminate its backends.
func storeWithRuns(t *testing.T) (*Store, *sql.DB) {
	t.Helper()
	dsn := pgtest.NewDB(t)
	s, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	admin := adminT(t, dsn)
	if _, err := s.db.Exec(`CREATE TABLE runs (n INT)`); err != nil {
		t.Fatal(err)
	}
	return s, admin
}

// TestTxRetriedWhenLostBeforeCommit: a transaction whose connection is terminated before its
// COMMIT was sent (the server rolled it back) runs again on another connection, and its work is
// done once.
func TestTxRetriedWhenLostBeforeCommit(t *testing.T) {
	t.Parallel()
	s, admin := storeWithRuns(t)
	ranTwice(t, s, func(tx *sqlx.Tx) error {
		killBackend(t, admin, tx)
		return nil
	})
}

// TestTxRetriedWhenIdleInTransactionEnded: a transaction that sat idle past its
// idle_in_transaction_session_timeout (a heartbeat's, Heartbeat) has its session ended by the server
// (25P03) before its COMMIT: it runs again on another connection, as after any other lost
// connection, and its work is done once.
func TestTxRetriedWhenIdleInTransactionEnded(t *testing.T) {
	t.Parallel()
	s, _ := storeWithRuns(t)
	ranTwice(t, s, func(tx *sqlx.Tx) error {
		if _, err := tx.Exec(`SELECT set_config('idle_in_transaction_session_timeout', '100', true)`); err != nil {
			return err
		}
		time.Sleep(time.Second)
		return nil
	})
}

// ranTwice runs a transaction of two inserts whose first run meets lose between them (its
// connection ends), and checks that it ran again and only the second run's rows are there.
func ranTwice(t *testing.T, s *Store, lose func(tx *sqlx.Tx) error) {
	t.Helper()
	runs := 0
	err := s.tx(context.Background(), func(tx *sqlx.Tx) error {
		runs++
		if _, err := tx.Exec(`INSERT INTO runs VALUES ($1)`, runs); err != nil {
			return err
		}
		if runs == 1 {
			if err := lose(tx); err != nil {
				return err
			}
		}
		_, err := tx.Exec(`INSERT INTO runs VALUES ($1)`, runs)
		return err
	})
	var got []int
	if err := s.db.Select(&got, `SELECT n FROM runs ORDER BY n`); err != nil {
		t.Fatal(err)
	}
	if err != nil || runs != 2 || len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("tx: err %v after %d runs, rows %v; want the second run's two rows", err, runs, got)
	}
}

// TestTxCommitFailureNotRetried: a COMMIT that fails on a lost connection is not run again (its
// outcome is unknown in general): the error is returned after one run of fn.
func TestTxCommitFailureNotRetried(t *testing.T) {
	t.Parallel()
	s, admin := storeWithRuns(t)
	s.testHookBeforeCommit = func(tx *sqlx.Tx) { killBackend(t, admin, tx) }
	runs := 0
	err := s.tx(context.Background(), func(tx *sqlx.Tx) error {
		runs++
		_, err := tx.Exec(`INSERT INTO runs VALUES ($1)`, runs)
		return err
	})
	if err == nil || !connLost(err) || !strings.Contains(err.Error(), "commit") || runs != 1 {
		t.Fatalf("tx: err %v after %d runs; want the COMMIT's lost connection after one run", err, runs)
	}
	s.testHookBeforeCommit = nil
	var n int
	if err := s.db.Get(&n, `SELECT count(*) FROM runs`); err != nil || n != 0 {
		t.Fatalf("%d rows (err %v): the killed transaction committed", n, err)
	}
}

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/persistence/postgres"
)

// The replication section: what PostgreSQL's asynchronous replication loses in a failover, the
// reason carryover's docs require synchronous replication. Events are appended while the primary is
// SIGKILLed and its asynchronous replica promoted; acknowledged events missing on the new primary,
// and acknowledged numbers handed out again for other events, are counted. How many depends on
// timing: a measurement, not a test (the synchronous case, where none may be lost, is the test
// persistence/postgres TestFailoverSynchronous). The numbers left on the new primary must still be
// gapless: a gap fails the section.

func benchReplicationSection(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	before, after := 200, 300
	if env.Quick {
		before, after = 20, 40
	}
	primary, replica, s, done, err := replSetUp(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	evs, back, err := replFailover(ctx, s, primary, replica, before, after)
	if err != nil {
		return nil, err
	}
	got, err := s.ListEvents(ctx, "f", carryover.EventQuery{})
	if err != nil {
		return nil, err
	}
	return replRows(got, evs, back)
}

// replSetUp starts a primary (not under the scratch dir: PostgreSQL runs as nobody when we are
// root) with an asynchronous streaming replica, and opens the store on both with one session; done
// closes and removes all that.
func replSetUp(ctx context.Context) (primary, replica *pgtest.Server, s *postgres.Store, done func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	done = stopAll
	defer func() {
		if err != nil {
			stopAll() // not done: a failed return has set it to nil
		}
	}()
	if primary, err = pgtest.Init(""); err != nil {
		return nil, nil, nil, nil, err
	}
	stops = append(stops, func() { primary.Remove() })
	if err = primary.Start("synchronous_commit=on"); err != nil {
		return nil, nil, nil, nil, err
	}
	admin, err := sql.Open("pgx", primary.DSN("postgres"))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer admin.Close()
	if _, err = admin.Exec(`CREATE DATABASE carryover`); err != nil {
		return nil, nil, nil, nil, err
	}
	if replica, err = primary.Replica(); err != nil {
		return nil, nil, nil, nil, err
	}
	stops = append(stops, func() { replica.Remove() })
	if err = waitAsyncStreaming(admin); err != nil {
		return nil, nil, nil, nil, err
	}
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/carryover?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port, replica.Port)
	if s, err = postgres.Open(ctx, dsn, postgres.Options{}); err != nil {
		return nil, nil, nil, nil, err
	}
	stops = append(stops, func() { s.Close() })
	if err = s.CreateSession(ctx, carryover.SessionRecord{ID: "f", State: "running"}); err != nil {
		return nil, nil, nil, nil, err
	}
	err = waitReplayed(admin, replica)
	return primary, replica, s, done, err
}

// waitReplayed waits up to 30 s until the replica has replayed all the primary wrote so far: the
// schema and the session the events go to. What the failover may lose is the events appended
// after; without the wait a loaded machine's replica could lag behind the set-up itself, and the
// promoted one had no sessions table, so no append was ever acknowledged again (the section failed
// under `make test`'s load: "relation "sessions" does not exist", 60 s of refused appends).
func waitReplayed(admin *sql.DB, replica *pgtest.Server) error {
	var lsn string
	if err := admin.QueryRow(`SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		return fmt.Errorf("primary's WAL position: %w", err)
	}
	rdb, err := sql.Open("pgx", replica.DSN("postgres"))
	if err != nil {
		return err
	}
	defer rdb.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var done bool
		err := rdb.QueryRow(`SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&done)
		if err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica did not replay the set-up (to %s) in 30 s (last error: %v)", lsn, err)
		}
	}
}

// waitAsyncStreaming waits up to 30 s until the primary streams to its replica asynchronously.
func waitAsyncStreaming(admin *sql.DB) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var state string
		admin.QueryRow(`SELECT sync_state FROM pg_stat_replication`).Scan(&state)
		if state == "async" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica not streaming (state %q)", state)
		}
	}
}

// replFailover appends events until before were acknowledged, SIGKILLs the primary, promotes the
// replica and appends until after were; it returns the acknowledged events and the time from the
// kill to the appends acknowledged again.
func replFailover(ctx context.Context, s *postgres.Store, primary, replica *pgtest.Server, before, after int) ([]carryover.Event, time.Duration, error) {
	stop, acked := make(chan struct{}), make(chan int, 1)
	var evs []carryover.Event
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); evs = pgtest.AppendUntil(s, "f", stop, acked) }()
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() } // the appends end, on every path
	defer halt()
	if err := waitEventsAcked(acked, before); err != nil {
		return nil, 0, err
	}
	killed := time.Now()
	primary.Kill()
	rdb, err := sql.Open("pgx", replica.DSN("postgres"))
	if err != nil {
		return nil, 0, err
	}
	_, err = rdb.Exec(`SELECT pg_promote(true, 60)`)
	rdb.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("promote: %w", err)
	}
	if err := waitEventsAcked(acked, after); err != nil {
		return nil, 0, err
	}
	back := time.Since(killed)
	halt()
	return evs, back, nil
}

// replRows counts the acknowledged events missing on the new primary (lost) and the numbers it
// handed out again for other events (reused); a gap in what is left fails the section.
func replRows(got, evs []carryover.Event, back time.Duration) ([]benchRow, error) {
	bySeq := map[int64]string{}
	gaps := 0
	for i, e := range got {
		if e.SequenceNumber != int64(i+1) {
			gaps++
		}
		bySeq[e.SequenceNumber] = string(e.Payload)
	}
	lost, reused := 0, 0
	for _, e := range evs {
		p, ok := bySeq[e.SequenceNumber]
		switch {
		case !ok:
			lost++
		case p != string(e.Payload):
			reused++
		}
	}
	rows := []benchRow{
		{Name: "async failover: acknowledged events lost", Ours: fmt.Sprintf("%d of %d", lost, len(evs)), Note: "async replica promoted after kill -9 of the primary; synchronous replication loses none (test)"},
		{Name: "async failover: acknowledged numbers reused", Ours: fmt.Sprintf("%d", reused)},
		{Name: "async failover: appends acknowledged again after", Ours: fmtDur(back), Note: "kill -9 -> promotion -> next acknowledged append"},
	}
	if gaps > 0 { // losing events is async replication's nature; gaps in what is left would be ours
		return rows, fmt.Errorf("%d gaps in the event numbers on the promoted replica", gaps)
	}
	return rows, nil
}

// waitEventsAcked waits up to a minute until n events were acknowledged.
func waitEventsAcked(acked <-chan int, n int) error {
	deadline := time.After(60 * time.Second)
	for {
		select {
		case got := <-acked:
			if got >= n {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("fewer than %d events acknowledged in 60 s", n)
		}
	}
}

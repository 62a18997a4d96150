package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
)

// failoverPair starts a primary and a streaming replica of it, synchronous when sync is set (every
// commit waits for the replica; what asynchronous replication loses in a failover is measured by
// carryover-bench's replication section), with a database "carryover", and returns them with a DSN naming
// both hosts (target_session_attrs=read-write: connections go to whichever is the primary).
func failoverPair(t *testing.T, sync bool) (primary, replica *pgtest.Server, dsn string) {
	t.Helper()
	primary, err := pgtest.Init("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Remove() })
	if err := primary.Start("synchronous_commit=on"); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", primary.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE DATABASE carryover`); err != nil {
		t.Fatal(err)
	}
	if replica, err = primary.Replica(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Remove() })
	if sync {
		for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`} {
			if _, err := admin.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[bool]string{true: "sync", false: "async"}[sync]
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var state string
		admin.QueryRow(`SELECT sync_state FROM pg_stat_replication`).Scan(&state)
		if state == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica not %s (state %q)", want, state)
		}
	}
	dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/carryover?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port, replica.Port)
	return primary, replica, dsn
}

// TestFailoverSynchronous (scenario 7): events are appended while the primary is SIGKILLed and the
// synchronous replica promoted. Every acknowledged event is on the new primary with its number and
// payload, numbers stay 1..n without gap, and none was handed out twice.
func TestFailoverSynchronous(t *testing.T) {
	primary, replica, dsn := failoverPair(t, true)
	s, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sessionT(t, s, "f")
	stop, acked := make(chan struct{}), make(chan int, 1)
	var evs []carryover.Event
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); evs = pgtest.AppendUntil(s, "f", stop, acked) }()
	waitAcked(t, acked, 50)
	killed := time.Now()
	primary.Kill()
	promote(t, replica)
	waitAcked(t, acked, 100)
	t.Logf("appends acknowledged again %v after the primary was killed (promotion included)", time.Since(killed).Round(time.Millisecond))
	close(stop)
	wg.Wait()
	checkAcked(t, s, "f", evs)
}

func waitAcked(t *testing.T, acked <-chan int, n int) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case got := <-acked:
			if got >= n {
				return
			}
		case <-deadline:
			t.Fatalf("fewer than %d events acknowledged in 60 s", n)
		}
	}
}

// promote makes the replica the primary.
func promote(t *testing.T, replica *pgtest.Server) {
	t.Helper()
	db, err := sql.Open("pgx", replica.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`SELECT pg_promote(true, 60)`); err != nil {
		t.Fatal(err)
	}
}

// checkAcked fails unless every acknowledged event is stored with its number and payload, numbers
// are gapless and no number was acknowledged twice.
func checkAcked(t *testing.T, s *Store, sid string, acked []carryover.Event) {
	t.Helper()
	got, err := s.ListEvents(context.Background(), sid, carryover.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[int64]string{}
	for i, e := range got {
		if e.SequenceNumber != int64(i+1) {
			t.Fatalf("gap: event %d has number %d", i, e.SequenceNumber)
		}
		bySeq[e.SequenceNumber] = string(e.Payload)
	}
	seen := map[int64]bool{}
	for _, e := range acked {
		if seen[e.SequenceNumber] {
			t.Fatalf("number %d acknowledged twice", e.SequenceNumber)
		}
		seen[e.SequenceNumber] = true
		if p, ok := bySeq[e.SequenceNumber]; !ok || p != string(e.Payload) {
			t.Fatalf("acknowledged event %d (%s) lost or replaced (%q) after the failover", e.SequenceNumber, e.Payload, p)
		}
	}
	t.Logf("%d events acknowledged across the failover, %d stored, none lost", len(acked), len(got))
}

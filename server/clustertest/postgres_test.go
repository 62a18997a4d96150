package clustertest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// run runs code in session id on n and requires a 200 with an ok status. A 421 (the session's owner
// is gone and its TTL not over yet) is retried, as a client of a cluster does, for up to 4 TTLs.
func run(t *testing.T, n *node, id, code string) *client.RunResult {
	t.Helper()
	deadline := time.Now().Add(4 * testTTL)
	calls := []string{time.Now().UTC().Format(time.StampMicro)}
	r, err := n.c.Run(t.Context(), id, client.RunRequest{Code: code})
	for client.ErrorCode(err) == "not_owner" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		calls = append(calls, time.Now().UTC().Format(time.StampMicro))
		r, err = n.c.Run(t.Context(), id, client.RunRequest{Code: code})
	}
	if err != nil {
		var details map[string]any
		if e := (*client.Error)(nil); errors.As(err, &e) {
			details = e.Details
		}
		t.Fatalf("run on %s in %s: %v (details %v; calls started %v, failed %s)", n.name, id, err, details, calls,
			time.Now().UTC().Format(time.StampMicro))
	}
	if r.Status != "ok" {
		t.Fatalf("run on %s in %s: status %s: %+v", n.name, id, r.Status, r)
	}
	return r
}

// gapless fails unless the session's events are numbered 1..n without gap or repeat.
func gapless(t *testing.T, n *node, id string) []client.Event {
	t.Helper()
	evs, err := n.c.Events(t.Context(), id, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.SequenceNumber != int64(i+1) {
			t.Fatalf("event %d of %s has number %d: gap or duplicate", i, id, e.SequenceNumber)
		}
	}
	return evs
}

// TestPostgresNodeKilledAndReplaced: a node on PostgreSQL runs a session (variables and a workspace
// file), is SIGKILLed, and a new node with an empty data dir of its own serves the session from the
// database: the last committed turn is there, and the event log continues without gap or repeat.
func TestPostgresNodeKilledAndReplaced(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a := startNode(t, "a", dsn)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "pg1"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "pg1", "x = 41\nopen('note.txt', 'w').write('kept')")
	run(t, a, "pg1", "x += 1\ndef f(v):\n    return v * 2")
	before := gapless(t, a, "pg1")
	a.kill()

	b := startNode(t, "b", dsn)
	r := run(t, b, "pg1", "print(f(x), open('note.txt').read())")
	if strings.TrimSpace(r.Stdout) != "84 kept" {
		t.Fatalf("after the node's death: stdout %q, want \"84 kept\"", r.Stdout)
	}
	after := gapless(t, b, "pg1")
	if len(after) <= len(before) {
		t.Fatalf("%d events after the second node's run, %d before", len(after), len(before))
	}
	for i, e := range before {
		if after[i].EventType != e.EventType {
			t.Fatalf("event %d changed from %s to %s", i+1, e.EventType, after[i].EventType)
		}
	}
	list, err := b.c.ListSessions(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != "pg1" {
		t.Fatalf("sessions on the new node: %+v (%v)", list, err)
	}
}

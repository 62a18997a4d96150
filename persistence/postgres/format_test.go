package postgres

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/persistence/format"
	"github.com/jmoiron/sqlx"
)

// A rolling upgrade, at the store: node "new" reads one format more than node "old" (MaxFormat,
// the test hook standing for the next build). While old is alive the cluster writes old's format;
// once old has left (its heartbeat expired) new switches to its own, records it, and old can no
// longer start on the store: it is refused with both formats named, and an old node that opened the
// store before the switch (it was away, or starting) fails its heartbeat, so it never serves.
func TestClusterWritesTheFormatEveryNodeReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDB(t)
	open := func(id string, max int) (*Store, error) {
		return Open(ctx, dsn, Options{Node: carryover.NodeInfo{ID: id, Addr: "http://" + id}, MaxFormat: max})
	}
	oldF, newF := format.Newest, format.Newest+1
	nw, err := open("new", newF)
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	old, err := open("old", oldF)
	if err != nil {
		t.Fatal(err)
	}
	// The old node is in the cluster first (a new node alone would switch at once, and the old
	// one could then no longer join).
	if err := old.Heartbeat(ctx, 2*time.Second, carryover.NodeLoad{}); err != nil {
		t.Fatal(err)
	}
	if err := nw.Heartbeat(ctx, time.Minute, carryover.NodeLoad{}); err != nil {
		t.Fatal(err)
	}
	if nw.Format() != oldF {
		t.Fatalf("the new node stamps format %d beside an old node, want %d", nw.Format(), oldF)
	}
	if f, err := nw.WriteFormat(ctx); err != nil || f != oldF {
		t.Fatalf("new node beside an old one writes format %d (%v), want %d", f, err, oldF)
	}
	if f, err := old.WriteFormat(ctx); err != nil || f != oldF {
		t.Fatalf("old node writes format %d (%v), want %d", f, err, oldF)
	}
	late, err := open("late", oldF) // an old node that opened the store but has not heartbeaten yet
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	// The old node stops; its heartbeat expires.
	old.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := nw.WriteFormat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f == newF {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still writing format %d after the old node left", f)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if nw.Format() != newF {
		t.Fatalf("the new node stamps format %d after the switch, want %d", nw.Format(), newF)
	}
	// An old build can no longer start on this store, nor join the cluster.
	_, err = open("old", oldF)
	wants := []string{"checkpoint format " + strconv.Itoa(newF), "reads formats up to " + strconv.Itoa(oldF)}
	for _, want := range wants {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("an old node on a store in format %d: %v (want %q)", newF, err, want)
		}
	}
	err = late.Heartbeat(ctx, time.Minute, carryover.NodeLoad{})
	for _, want := range wants {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("heartbeat of an old node after the switch: %v (want %q)", err, want)
		}
	}
	if f, err := nw.WriteFormat(ctx); err != nil || f != newF {
		t.Fatalf("after the refused heartbeat the cluster writes format %d (%v), want %d", f, err, newF)
	}
}

// A database migrated by a newer carryover is refused before any migration runs, naming both
// schema versions.
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDB(t)
	s, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations (name) VALUES ('migrations/0999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, dsn, Options{})
	if err == nil || !strings.Contains(err.Error(), "schema version 999 (0999_future.sql), newer than this carryover knows (schema version") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// A single node (no cluster, no heartbeat) writes its own newest format from the start, and records
// it: an older carryover is then refused on the store.
func TestSingleNodeWritesItsNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDB(t)
	newF := format.Newest + 1
	s, err := Open(ctx, dsn, Options{MaxFormat: newF})
	if err != nil {
		t.Fatal(err)
	}
	if s.Format() != newF {
		t.Fatalf("a single node stamps format %d, want its newest %d", s.Format(), newF)
	}
	s.Close()
	_, err = Open(ctx, dsn, Options{})
	if err == nil || !strings.Contains(err.Error(), "holds checkpoint format "+strconv.Itoa(newF)) {
		t.Fatalf("an older single node on a store in format %d: %v", newF, err)
	}
}

// TestFrozenHeartbeatDoesNotHoldTheFormatSwitch: a node frozen inside its heartbeat's transaction
// (SIGSTOP, a paused VM) holds the format lock shared. The cluster's switch to a newer format must
// not wait for it to wake: PostgreSQL ends its session once it has been idle in that transaction
// for its TTL (at least 5 s), the switch happens, and the frozen heartbeat fails when the node wakes. Before, the
// switch waited for as long as the node was frozen (server/clustertest's
// TestOldNodeRefusedAtHeartbeatExits failed on it when its pause landed inside a heartbeat).
func TestFrozenHeartbeatDoesNotHoldTheFormatSwitch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDB(t)
	open := func(id string, max int) *Store {
		s, err := Open(ctx, dsn, Options{Node: carryover.NodeInfo{ID: id, Addr: "http://" + id}, MaxFormat: max})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	oldF, newF := format.Newest, format.Newest+1
	const ttl = time.Second
	old, nw := open("old", oldF), open("new", newF)
	if err := old.Heartbeat(ctx, ttl, carryover.NodeLoad{}); err != nil {
		t.Fatal(err)
	}
	if err := nw.Heartbeat(ctx, time.Minute, carryover.NodeLoad{}); err != nil {
		t.Fatal(err)
	}
	frozen, wake := make(chan struct{}), make(chan struct{})
	old.testHookBeforeCommit = func(*sqlx.Tx) { close(frozen); <-wake }
	beat := make(chan error, 1)
	go func() { beat <- old.Heartbeat(ctx, ttl, carryover.NodeLoad{}) }()
	<-frozen
	start := time.Now()
	for {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		f, err := nw.WriteFormat(wctx)
		cancel()
		if err == nil && f == newF {
			break
		}
		if time.Since(start) > 15*ttl {
			close(wake)
			t.Fatalf("the format switch waits for a node frozen in its heartbeat: format %d (%v) after %s", f, err, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(wake)
	if err := <-beat; err == nil {
		t.Fatal("the frozen node's heartbeat committed after the switch")
	}
}

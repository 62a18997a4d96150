package sqlite

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestWritesDoNotWaitForTheReadersPool: a node whose readers hold every pooled connection (restores
// streaming chunks, exports) still commits turns, because writes have a connection of their own.
// With writes drawn from the pool, this write waited for a reader to finish while holding the
// writer mutex, and every other session's write queued behind it.
func TestWritesDoNotWaitForTheReadersPool(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	max := s.db.Stats().MaxOpenConnections
	held := make([]*sql.Conn, 0, max)
	for len(held) < max {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		c, err := s.db.Conn(ctx)
		cancel()
		if err != nil {
			break // the pool is exhausted: the writer's connection is not in it
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	if len(held) == 0 {
		t.Fatal("no pooled connection could be taken")
	}
	done := make(chan error, 1)
	go func() {
		done <- s.CreateSession(ctx, carryover.SessionRecord{ID: "s", State: "running", CreatedAt: dbNow()})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("a write waited over 5 s while readers held all %d pooled connections", len(held))
	}
}

// TestAWriterConnectionGivenUpIsReplaced: once database/sql has given up on the writer's connection
// (sql.ErrConnDone), the next write opens another instead of every write failing from then on.
func TestAWriterConnectionGivenUpIsReplaced(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	s.wconn.Close()
	if err := s.CreateSession(ctx, carryover.SessionRecord{ID: "s", State: "running", CreatedAt: dbNow()}); err != nil {
		t.Fatalf("write after the writer's connection was closed: %v", err)
	}
	if _, err := s.GetSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
}

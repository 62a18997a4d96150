package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// subscribe connects to the session's websocket through n (retrying 421s while its owner's TTL runs
// out) and asks for the events after after.
func subscribe(t *testing.T, n *node, id string, after int64) *client.Conn {
	t.Helper()
	deadline := time.Now().Add(4 * testTTL)
	for {
		conn, err := n.c.Connect(t.Context(), id)
		if err == nil {
			if err := conn.Send(t.Context(), client.SubscribeEvents{AfterSequence: after}); err != nil {
				t.Fatal(err)
			}
			return conn
		}
		if client.ErrorCode(err) != "not_owner" || time.Now().After(deadline) {
			t.Fatalf("websocket through %s: %v", n.name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// collect reads event frames into seen until the connection ends or want events arrived.
func collect(conn *client.Conn, seen *[]int64, want int) error {
	for len(*seen) < want {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		f, err := conn.Next(ctx)
		cancel()
		if err != nil {
			return err
		}
		if f.Type == "event" && f.Event != nil {
			*seen = append(*seen, f.Event.SequenceNumber)
		}
	}
	return nil
}

// TestWebsocketAcrossOwnerDeath (scenario 9): a websocket client connected through node B to a
// session owned by A follows its events. A is SIGKILLed; the client's stream ends, it reconnects
// through B with after_sequence = the last event it saw, and B (once it claimed the session) streams
// on: the client sees every event number exactly once, in order, with no gap.
func TestWebsocketAcrossOwnerDeath(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "ws"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "ws", "x = 1")
	conn := subscribe(t, b, "ws", 0)
	var seen []int64
	stored := gapless(t, a, "ws")
	if err := collect(conn, &seen, len(stored)); err != nil {
		t.Fatalf("stream through b before a's death: %v", err)
	}
	run(t, a, "ws", "x = 2")
	a.kill()
	collect(conn, &seen, 1<<30) // ends when the proxied stream is cut
	conn.Close()

	last := seen[len(seen)-1]
	conn = subscribe(t, b, "ws", last)
	defer conn.Close()
	run(t, b, "ws", "x = 3")
	all := gapless(t, b, "ws")
	if err := collect(conn, &seen, len(all)); err != nil {
		t.Fatalf("stream through b after a's death: %v (seen %v)", err, seen)
	}
	for i, seq := range seen {
		if seq != int64(i+1) {
			t.Fatalf("event numbers the client saw: %v: gap or duplicate at %d", seen, i)
		}
	}
}

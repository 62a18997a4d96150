package postgres

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
)

// TestNodesPublishLoad: each heartbeat writes the node's load and Nodes reads the live nodes' loads;
// a node whose heartbeat lapsed is gone, and a node of an older build (its heartbeat renews the row
// without a load) is listed as not published, with no load: its room is unknown.
func TestNodesPublishLoad(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t)
	a := nodeStore(t, dsn, "a", time.Minute)
	b := nodeStore(t, dsn, "b", time.Minute)
	full := carryover.NodeLoad{Live: 1, Capacity: 1}
	room := carryover.NodeLoad{Live: 2, Capacity: 4, Queued: 1, Idle: 1}
	if err := a.Heartbeat(ctx, time.Minute, full); err != nil {
		t.Fatal(err)
	}
	if err := b.Heartbeat(ctx, time.Minute, room); err != nil {
		t.Fatal(err)
	}
	want := []carryover.NodeState{
		{NodeInfo: carryover.NodeInfo{ID: "a", Addr: "http://a"}, Load: full, Published: true},
		{NodeInfo: carryover.NodeInfo{ID: "b", Addr: "http://b"}, Load: room, Published: true},
	}
	got, err := b.Nodes(ctx)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Nodes: %+v, %v; want %+v", got, err, want)
	}
	// An older build's heartbeat: the row is renewed, its load columns are not.
	if _, err := a.db.ExecContext(ctx, `UPDATE nodes SET heartbeat_at = now() + interval '1 millisecond' WHERE id = 'a'`); err != nil {
		t.Fatal(err)
	}
	want[0].Load, want[0].Published = carryover.NodeLoad{}, false
	if got, err := b.Nodes(ctx); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a's heartbeat without a load: %+v, %v; want %+v", got, err, want)
	}
	if err := a.Heartbeat(ctx, time.Millisecond, full); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a's 1 ms TTL runs out on the database's clock
	if got, err := b.Nodes(ctx); err != nil || len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("after a expired: %+v, %v; want b only", got, err)
	}
}

package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/capacity"
)

// TestRefusalInAFullCluster: a claim the cluster router kept here because no node had room
// (carryover.WithClusterFull) is refused, after the queue time, with a message that says the cluster
// is full and reason cluster_full; the node's own figures and Retry-After stay. Without the mark the
// refusal is the node's own.
func TestRefusalInAFullCluster(t *testing.T) {
	t.Parallel()
	l := capacity.New(capacity.Config{Max: 1, Wait: 10 * time.Millisecond, QueueMax: 4})
	if _, err := l.Acquire(context.Background(), capacity.Claim{Tenant: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	acquire := func(ctx context.Context) error {
		_, err := l.Acquire(ctx, capacity.Claim{Tenant: "t"}, nil)
		return err
	}
	plain := inFullCluster(context.Background(), acquire(context.Background()))
	if e := carryover.ErrorOf(plain); e.Details["reason"] != "busy" || strings.Contains(e.Message, "cluster") {
		t.Fatalf("unmarked refusal: %v %v", e.Message, e.Details)
	}
	ctx := carryover.WithClusterFull(context.Background(), "2 of 2 kernels busy on 2 nodes and 0 requests queued")
	e := carryover.ErrorOf(inFullCluster(ctx, acquire(ctx)))
	if e.Code != carryover.CodeCapacity || e.Details["reason"] != "cluster_full" || e.Details["live"] != 1 ||
		!strings.HasPrefix(e.Message, "the cluster is at capacity (2 of 2 kernels busy on 2 nodes") {
		t.Fatalf("refusal in a full cluster: %q %v", e.Message, e.Details)
	}
	if secs, ok := e.RetryAfter(); !ok || secs != 1 {
		t.Fatalf("Retry-After %d %v", secs, ok)
	}
	if carryover.ErrorOf(plain).Details["reason"] != "busy" {
		t.Fatal("the node's own error was changed in place")
	}
}

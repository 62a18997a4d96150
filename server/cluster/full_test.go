package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/capacity"
)

// TestRefusalInAFullCluster: a claim refused while a request for its session that the router kept
// here because no node had room is served says, after the queue time, that the cluster is full, with
// reason cluster_full; the node's own figures and Retry-After stay. Without such a request, or once
// it is answered, the refusal is the node's own.
func TestRefusalInAFullCluster(t *testing.T) {
	t.Parallel()
	l := capacity.New(capacity.Config{Max: 1, Wait: 10 * time.Millisecond, QueueMax: 4})
	if _, err := l.Acquire(context.Background(), capacity.Claim{Tenant: "t"}, nil); err != nil {
		t.Fatal(err)
	}
	acquire := func() error {
		_, err := l.Acquire(context.Background(), capacity.Claim{Tenant: "t"}, nil)
		return err
	}
	f := NewFull()
	plain := f.Refusal("s", acquire())
	if e := carryover.ErrorOf(plain); e.Details["reason"] != "busy" || strings.Contains(e.Message, "cluster") {
		t.Fatalf("unmarked refusal: %v %v", e.Message, e.Details)
	}
	done := f.keep("s", "2 of 2 kernels busy on 2 nodes and 0 requests queued")
	done2 := f.keep("s", "2 of 2 kernels busy on 2 nodes and 1 requests queued")
	e := carryover.ErrorOf(f.Refusal("s", acquire()))
	if e.Code != carryover.CodeCapacity || e.Details["reason"] != "cluster_full" || e.Details["live"] != 1 ||
		!strings.HasPrefix(e.Message, "the cluster is at capacity (2 of 2 kernels busy on 2 nodes and 1 requests") {
		t.Fatalf("refusal in a full cluster: %q %v", e.Message, e.Details)
	}
	if secs, ok := e.RetryAfter(); !ok || secs != 1 {
		t.Fatalf("Retry-After %d %v", secs, ok)
	}
	if carryover.ErrorOf(plain).Details["reason"] != "busy" {
		t.Fatal("the node's own error was changed in place")
	}
	if e := carryover.ErrorOf(f.Refusal("other", acquire())); e.Details["reason"] != "busy" {
		t.Fatalf("another session's refusal: %v", e.Details)
	}
	notCapacity := carryover.Errorf(carryover.CodeInvalid, "x")
	if f.Refusal("s", notCapacity) != error(notCapacity) {
		t.Fatal("a refusal that is not capacity was changed")
	}
	done()
	if e := carryover.ErrorOf(f.Refusal("s", acquire())); e.Details["reason"] != "cluster_full" {
		t.Fatalf("with one of two requests still served: %v", e.Details)
	}
	done2()
	if e := carryover.ErrorOf(f.Refusal("s", acquire())); e.Details["reason"] != "busy" {
		t.Fatalf("after the requests were answered: %v", e.Details)
	}
	var none *Full
	if none.Refusal("s", plain) != plain {
		t.Fatal("a nil record changed a refusal")
	}
}

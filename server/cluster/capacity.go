package cluster

import (
	"fmt"

	"github.com/carryover/carryover"
)

// fullness is the cluster's figures when no node has room for a session: this node and every peer
// it knows of are at capacity with every kernel busy (or a queue waiting).
type fullness struct{ nodes, live, capacity, queued int }

func full(local carryover.NodeLoad, others []carryover.NodeState) *fullness {
	f := &fullness{nodes: len(others) + 1, live: local.Live, capacity: local.Capacity, queued: local.Queued}
	for _, o := range others {
		f.live, f.capacity, f.queued = f.live+o.Load.Live, f.capacity+o.Load.Capacity, f.queued+o.Load.Queued
	}
	return f
}

func (f fullness) String() string {
	nodes := "nodes"
	if f.nodes == 1 {
		nodes = "node" // a cluster of one node: PostgreSQL without peers
	}
	return fmt.Sprintf("%d of %d kernels busy on %d %s and %d requests queued", f.live, f.capacity, f.nodes, nodes, f.queued)
}

// clusterFull is the 429 of a new session no node has room for; the client retries after
// Retry-After, when the loads have been published again.
func (n *Node) clusterFull(f fullness) error {
	retry := n.retryAfter()
	return carryover.Errorf(carryover.CodeCapacity, "the cluster is at capacity: %s; retry in %d s", f, retry).
		WithDetails("reason", "cluster_full", "nodes", f.nodes, "live", f.live, "capacity", f.capacity,
			"queued", f.queued, "retry_after_seconds", retry)
}

// nodeFull is the 429 of a session another node placed here with a stale view of this node's room:
// this node bounds itself, and the client retries through any node after Retry-After.
func (n *Node) nodeFull(l carryover.NodeLoad) error {
	retry := n.retryAfter()
	msg := fmt.Sprintf("node %s, chosen for its room, is at capacity now: %d of %d kernels busy and %d requests queued; retry in %d s",
		n.o.Node.ID, l.Live, l.Capacity, l.Queued, retry)
	return carryover.Errorf(carryover.CodeCapacity, "%s", msg).WithDetails("reason", "busy",
		"live", l.Live, "capacity", l.Capacity, "queued", l.Queued, "retry_after_seconds", retry)
}

// unreachable is the answer to a new session sent to node id that could not be reached (it died
// since its last heartbeat): nothing was created, and a retry after the next heartbeat's view goes
// elsewhere.
func (n *Node) unreachable(id string) error {
	retry := n.retryAfter()
	return carryover.Errorf(carryover.CodeCapacity, "node %s, chosen for its room, did not answer; retry in %d s", id, retry).
		WithDetails("reason", "unreachable", "node", id, "retry_after_seconds", retry)
}

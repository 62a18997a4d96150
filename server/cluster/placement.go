package cluster

import (
	"context"
	"hash/fnv"
	"math"
	"sync"

	"github.com/carryover/carryover"
)

// Placement (docs/capacity.md, "Cluster placement"): a node that receives a new session, or the wake
// of a session nobody serves, while it has no free slot sends the request to a node with room, through
// the proxy with the hop header; that node creates or claims the session and bounds itself as ever
// (its own slots, queue and 429). Each node publishes its load with its heartbeat and reads the
// others' after it, so its view is at most one heartbeat old; a stale view costs a 429 from the
// target or a second hop refused (421), never a loop.

// peers is this node's view of the live nodes' loads (itself included), read after every heartbeat.
type peers struct {
	mu    sync.Mutex
	nodes []carryover.NodeState
}

func (p *peers) set(nodes []carryover.NodeState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes = nodes
}

// others is the view without node self and without nodes no one can proxy to: the peers that
// published their load, and whether some live peer did not (a node of an older build, whose room
// is unknown).
func (p *peers) others(self string) (known []carryover.NodeState, unknown bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	known = make([]carryover.NodeState, 0, len(p.nodes))
	for _, s := range p.nodes {
		switch {
		case s.ID == self || s.Addr == "":
		case s.Published:
			known = append(known, s)
		default:
			unknown = true
		}
	}
	return known, unknown
}

// debit counts a session sent to node id in the view until the next read, so a burst through this
// node spreads over the nodes with room instead of piling onto the first of them.
func (p *peers) debit(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.nodes {
		l := &p.nodes[i].Load
		switch {
		case p.nodes[i].ID != id:
		case l.Free() != 0:
			l.Live++
		case l.Idle > 0:
			l.Idle--
		}
	}
}

// refreshPeers reads the live nodes' loads into the view; a failure keeps the last view (the
// targets bound themselves, so a stale one costs at most a 429).
func (n *Node) refreshPeers(ctx context.Context) {
	nodes, err := n.o.Ownership.Nodes(ctx)
	if err != nil {
		n.log.Warn("reading the nodes' load failed", "err", err)
		return
	}
	n.peers.set(nodes)
}

// place chooses the node for a session that will need a kernel: nil for this node, else a peer. In
// order: this node when it has a free slot (no hop); the peer with the most free slots; this node
// when it can hibernate an idle session; the peer with the most idle kernels. When no node has room
// it answers nil and the cluster's figures, unless a peer of an older build might have some: then
// this node keeps the session, as it did before placement.
func (n *Node) place() (*carryover.NodeState, *fullness) {
	local := n.load()
	if local.Free() != 0 {
		return nil, nil
	}
	others, unknown := n.peers.others(n.o.Node.ID)
	target := n.best(others, freeSlots)
	if target == nil && local.HasRoom() {
		placements.WithLabelValues("here").Inc()
		return nil, nil
	}
	if target == nil {
		target = n.best(others, idleKernels)
	}
	if target == nil && unknown {
		placements.WithLabelValues("here").Inc()
		return nil, nil
	}
	if target == nil {
		placements.WithLabelValues("full").Inc()
		return nil, full(local, others)
	}
	placements.WithLabelValues("peer").Inc()
	n.peers.debit(target.ID)
	return target, nil
}

// freeSlots scores a node by its free slots (no bound: the most).
func freeSlots(l carryover.NodeLoad) int {
	if f := l.Free(); f >= 0 {
		return f
	}
	return math.MaxInt
}

// idleKernels scores a node with room by the idle kernels it could hibernate.
func idleKernels(l carryover.NodeLoad) int {
	if !l.HasRoom() {
		return 0
	}
	return l.Idle
}

// best is the node with the highest positive score, nil when none scores above 0. Equals are ranked
// by a hash of this node's id and theirs: each node prefers its own among equals, so nodes placing at
// once with the same view spread over the peers instead of all choosing the same one.
func (n *Node) best(nodes []carryover.NodeState, score func(carryover.NodeLoad) int) *carryover.NodeState {
	var out *carryover.NodeState
	top, topRank := 0, uint64(0)
	for i := range nodes {
		s, rank := score(nodes[i].Load), n.rank(nodes[i].ID)
		if s > top || (s == top && out != nil && rank > topRank) {
			out, top, topRank = &nodes[i], s, rank
		}
	}
	return out
}

// rank is this node's fixed preference for node id among equals.
func (n *Node) rank(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(n.o.Node.ID + "\x00" + id))
	return h.Sum64()
}

// retryAfter is the Retry-After of a cluster-wide refusal: the loads are published again after a
// heartbeat, at least 1 s.
func (n *Node) retryAfter() int {
	return max(1, int(math.Ceil(n.o.Heartbeat.Seconds())))
}

// View is the live nodes' loads as this node last read them (itself included, as its own last
// heartbeat wrote it): GET /api/status shows it, so an operator sees what placement weighs.
func (n *Node) View() []carryover.NodeState {
	n.peers.mu.Lock()
	defer n.peers.mu.Unlock()
	return append([]carryover.NodeState(nil), n.peers.nodes...)
}

package carryover

import (
	"context"
	"time"
)

// A cluster runs several carryover nodes on one shared store. Each session has at most one owner
// node at a time, recorded in the store with an epoch that every claim bumps; a node's writes for a
// session are fenced by the epoch it holds, so a node that lost a session (paused past its TTL, cut
// off from the database) changes nothing when it comes back. A single node on SQLite has no owners.

// CodeNotOwner: the session is served by another node (or by none right now). HTTP 421 Misdirected
// Request: the caller asks the owner (details "owner_node", "owner_addr") or retries once.
const CodeNotOwner Code = "not_owner"

// ErrNotOwner matches errors of code CodeNotOwner under errors.Is.
var ErrNotOwner = &Error{Code: CodeNotOwner}

// NodeInfo is a node as the cluster knows it.
type NodeInfo struct {
	ID   string // cluster.node_id
	Addr string // cluster.advertise_addr: the URL other nodes proxy to
}

// NodeLoad is what a node holds and can take on, as its live-kernel slots count it
// (docs/capacity.md). A node publishes it with every heartbeat, so it is at most one heartbeat old.
type NodeLoad struct {
	Live     int // live-kernel slots held
	Capacity int // capacity.max_live_kernels; 0 or less: no bound
	Queued   int // claims waiting for a slot now
	Idle     int // live kernels whose session runs no turn: what the node may hibernate to make room
}

// Free is how many more kernels the node can start without hibernating a session (-1: no bound).
func (l NodeLoad) Free() int {
	if l.Capacity <= 0 {
		return -1
	}
	return max(0, l.Capacity-l.Live-l.Queued)
}

// HasRoom reports whether the node can take one more kernel: a free slot, or an idle session to
// hibernate for it with nobody queued before it.
func (l NodeLoad) HasRoom() bool {
	return l.Free() != 0 || (l.Queued == 0 && l.Idle > 0)
}

// NodeState is a live node with the load it published with its last heartbeat. Published is false
// for a node of an older build, whose heartbeat carries no load: its room is unknown.
type NodeState struct {
	NodeInfo
	Load      NodeLoad
	Published bool
}

// Owner is who serves a session: Node is "" when nobody does (never claimed, released, or its node's
// heartbeat expired).
type Owner struct {
	Node  string
	Addr  string
	Epoch int64
}

// Ownership is the store's record of nodes and session owners. Heartbeats and expiry use the
// database's clock, so nodes' clocks need not agree.
type Ownership interface {
	// Heartbeat records that this node is alive for ttl from now (database time), with its load now:
	// the others read it (Nodes) to place new sessions on a node with room.
	Heartbeat(ctx context.Context, ttl time.Duration, load NodeLoad) error
	// Nodes returns the live nodes with the load each published with its last heartbeat (none, and
	// Published false, for a node of an older build).
	Nodes(ctx context.Context) ([]NodeState, error)
	// Claim makes this node the owner of session id when nobody owns it, its owner's heartbeat
	// expired, or this node already owns it: one conditional UPDATE that bumps the epoch, so of two
	// nodes claiming at once exactly one wins. The loser gets CodeNotOwner; CodeNotFound when the
	// session does not exist.
	Claim(ctx context.Context, id string) (epoch int64, err error)
	// Release gives up session id (only if this node still holds it at the epoch it claimed).
	Release(ctx context.Context, id string) error
	// Owner returns who serves session id now.
	Owner(ctx context.Context, id string) (Owner, error)
	// Owners returns who serves each session that has a live owner now (one query: listings show
	// every session of the store with its owner, wherever it is served).
	Owners(ctx context.Context) (map[string]Owner, error)
	// Held reports the epoch this node holds session id at (false when it does not hold it).
	Held(id string) (int64, bool)
	// Forget drops this node's hold on every session without writing (it lost its lease).
	Forget()
}

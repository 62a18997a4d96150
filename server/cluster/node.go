// Package cluster makes a carryover server one node of a cluster sharing a PostgreSQL store: it
// heartbeats the node's row, fences itself when it cannot (stops serving its sessions before the
// TTL another node waits for runs out, measured on its own monotonic clock), and routes every
// session-scoped request: served here when this node owns the session, claimed and served here when
// nobody does, proxied to the owner otherwise (a stale owner answers 421 not_owner).
package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
)

// Sessions is what a node needs from the session service (server/session.Service).
type Sessions interface {
	// Evict drops a session at once, writing nothing; Adopt loads one from the store to serve it.
	Evict(id string) bool
	Adopt(ctx context.Context, id string) error
	Has(id string) bool
	IDs() []string
	// ReattachTarget is the session POST /api/sessions/reattach would pick for a client id (the
	// tenant in ctx), so that call is routed to its owner like any session-scoped one.
	ReattachTarget(ctx context.Context, clientID string) (string, error)
	// Load is this node's load: published with each heartbeat, weighed before taking a new session.
	Load() carryover.NodeLoad
}

// Options configure a node.
type Options struct {
	Node      carryover.NodeInfo
	Ownership carryover.Ownership
	Sessions  Sessions
	Heartbeat time.Duration // between heartbeats
	TTL       time.Duration // how long a heartbeat keeps the node alive for the others
	Token     string        // authenticates node-to-node hops
	// StatusOf maps an error code to the HTTP status the node answers it with (httpapi.StatusOf: the
	// one mapping); nil answers every error 500.
	StatusOf func(carryover.Code) int
	Logger   *slog.Logger
	// Refused is called once, after the node fenced itself, when a heartbeat is refused because the
	// cluster switched to a format this node cannot read (carryover.ErrNewerFormat): the server then
	// shuts down and exits non-zero, so its supervisor sees it, instead of heartbeating for ever.
	Refused func(error)
	// Full records the requests the router keeps here in a full cluster (full.go); the assembly
	// hands its Refusal to the session service. Nil: such a refusal is the node's own.
	Full *Full
}

// Node is this server's membership of the cluster.
type Node struct {
	o       Options
	log     *slog.Logger
	epoch   time.Time    // monotonic origin of lastOK
	lastOK  atomic.Int64 // nanoseconds after epoch at which the last successful heartbeat was SENT
	claimMu sync.Mutex   // one claim-and-adopt at a time on this node
	peers   peers        // the live nodes' loads, read after every heartbeat (placement.go)
	stop    context.CancelFunc
	done    chan struct{}
	// refusedOnce: Options.Refused is called once
	refusedOnce sync.Once
	drain       drainState // drain.go
}

// New makes a node; Start brings it up.
func New(o Options) *Node {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Node{o: o, log: o.Logger.With("node", o.Node.ID), epoch: time.Now()}
}

// margin is how long before the TTL runs out (for the others) this node stops serving: a quarter of
// the TTL, so clock-rate drift and a slow stop of kernels fit in.
func (n *Node) margin() time.Duration { return n.o.TTL / 4 }

// leaseValid reports whether this node may still act as the owner of what it holds: its last
// successful heartbeat was sent less than TTL - margin ago (monotonic clock, so a SIGSTOP or a
// suspended VM counts as time passing).
func (n *Node) leaseValid() bool {
	sent := n.epoch.Add(time.Duration(n.lastOK.Load()))
	return time.Since(sent) < n.o.TTL-n.margin()
}

// Start heartbeats once (the node must be alive before it serves) and reads the others' load, drops the sessions the service
// loaded at start-up (this node owns none of them yet: each is claimed on its first request), and
// starts the heartbeat and watchdog loops.
func (n *Node) Start(ctx context.Context) error {
	sent := time.Since(n.epoch)
	if err := n.o.Ownership.Heartbeat(ctx, n.o.TTL, n.load()); err != nil {
		return err
	}
	n.lastOK.Store(int64(sent))
	n.refreshPeers(ctx)
	for _, id := range n.o.Sessions.IDs() {
		if _, held := n.o.Ownership.Held(id); !held {
			n.o.Sessions.Evict(id)
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	n.stop, n.done = cancel, make(chan struct{})
	go n.loop(lctx)
	return nil
}

// loop heartbeats every Heartbeat and, between beats, fences the node when its lease ran out.
func (n *Node) loop(ctx context.Context) {
	defer close(n.done)
	beat := time.NewTicker(n.o.Heartbeat)
	defer beat.Stop()
	watch := time.NewTicker(max(n.o.Heartbeat/4, 10*time.Millisecond))
	defer watch.Stop()
	results := make(chan time.Duration, 1)
	inFlight := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if inFlight {
				continue // the previous heartbeat hangs (database unreachable): the watchdog decides
			}
			inFlight = true
			go func() {
				sent := time.Since(n.epoch)
				hctx, cancel := context.WithTimeout(ctx, n.o.TTL)
				defer cancel()
				if err := n.o.Ownership.Heartbeat(hctx, n.o.TTL, n.load()); err != nil {
					if errors.Is(err, carryover.ErrNewerFormat) {
						n.refused(err)
					}
					n.log.Warn("heartbeat failed", "err", err)
					sent = -1
				}
				results <- sent
				if sent >= 0 {
					n.refreshPeers(hctx)
				}
			}()
		case sent := <-results:
			inFlight = false
			if sent >= 0 {
				n.lastOK.Store(int64(sent))
			}
		case <-watch.C:
			if !n.leaseValid() {
				n.fence("heartbeat not renewed within the TTL minus the margin")
			}
		}
	}
}

// refused fences the node at once (the cluster writes a format it cannot read: nothing it holds may
// be served or written any more) and tells Options.Refused, once.
func (n *Node) refused(err error) {
	n.refusedOnce.Do(func() {
		n.log.Error("this node is refused by the cluster: it writes a checkpoint format this build cannot read; stopping", "err", err)
		n.lastOK.Store(-int64(n.o.TTL)) // the lease is over: no request claims a session here any more
		n.fence("refused: the cluster's format is newer than this node reads")
		if n.o.Refused != nil {
			n.o.Refused(err)
		}
	})
}

// fence stops serving every session this node holds, writing nothing: other nodes may own them now.
func (n *Node) fence(reason string) {
	ids := n.o.Sessions.IDs()
	if len(ids) > 0 {
		n.log.Warn("node fencing itself: stopping its sessions", "reason", reason, "sessions", len(ids))
	}
	n.o.Ownership.Forget()
	evicted := 0
	for _, id := range ids {
		if n.o.Sessions.Evict(id) {
			evicted++
		}
	}
	if evicted > 0 {
		n.log.Warn("node fenced itself: sessions stopped", "sessions", evicted)
	}
}

// Drain releases every session this node holds (after the service stopped their kernels at
// shutdown), so other nodes claim them at once instead of waiting for the TTL, and stops the loops.
func (n *Node) Drain(ctx context.Context) {
	if n.stop != nil {
		n.stop()
		<-n.done
	}
	if r, ok := n.o.Ownership.(interface {
		ReleaseAll(context.Context) (int, error)
	}); ok {
		count, err := r.ReleaseAll(ctx)
		n.log.Info("node drained: sessions released", "sessions", count, "err", err)
	}
}

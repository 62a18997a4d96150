package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
)

// Draining (docs/cluster.md): a node told to stop (SIGTERM) keeps its listener open and hands its
// sessions over while it still serves. Each session is handed over as soon as no turn runs on it
// (checkpointed, dropped here, released in the store), and every request for it from then on is
// forwarded to a node with room, which claims it, or answered 421 when it came from another node:
// so a client's next turn lands on a live node at once, instead of meeting a closed port while the
// node finishes every run and stops every kernel first. A draining node is not ready (GET /readyz),
// publishes no room (no peer places a session on it), and claims nothing while a peer can.

// drainState is a node's drain: whether it began, and each session's handover, run once.
type drainState struct {
	on     atomic.Bool
	ctx    context.Context // the handovers' context: they outlive the request that started them
	cancel context.CancelFunc
	mu     sync.Mutex
	// handoffs: closed when the session's handover ended (handed over, or kept here on a failure)
	handoffs map[string]chan struct{}
	ended    bool           // EndHandovers: no handover starts any more
	running  sync.WaitGroup // handovers under way
}

// Sessions a draining node hands over (server/session.Service).
type handing interface {
	// Handover checkpoints session id once no turn runs, drops it from this node and stops its
	// kernel; false when it was not here; an error leaves it here.
	Handover(ctx context.Context, id string) (bool, error)
}

// BeginDrain starts the drain: from now on this node is not ready, publishes no room and hands over
// each session it is asked for (HandOver hands over the rest). ctx bounds the handovers.
func (n *Node) BeginDrain(ctx context.Context) {
	n.drain.mu.Lock()
	defer n.drain.mu.Unlock()
	if n.drain.on.Load() {
		return
	}
	n.drain.ctx, n.drain.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.drain.handoffs = map[string]chan struct{}{}
	n.drain.on.Store(true)
	n.log.Info("node draining: handing its sessions over while it serves")
}

// Draining reports whether BeginDrain was called.
func (n *Node) Draining() bool { return n.drain.on.Load() }

// Ready says whether a load balancer should send this node new connections: an error says why not
// (it drains, or it lost contact with the cluster's database and serves nothing of its own).
func (n *Node) Ready() error {
	if n.Draining() {
		return fmt.Errorf("node %s is draining", n.o.Node.ID)
	}
	if !n.leaseValid() {
		return fmt.Errorf("node %s has no valid lease on the cluster's database", n.o.Node.ID)
	}
	return nil
}

// HandOver hands every session this node serves over, each as soon as it is idle, and returns once
// all are handed over or ctx ends (the ones left are released at exit, after the service closed).
func (n *Node) HandOver(ctx context.Context) {
	n.BeginDrain(ctx)
	ids := n.o.Sessions.IDs()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { n.waitHandOver(ctx, id) })
	}
	wg.Wait()
	n.log.Info("node drained: handovers done (each session logged as handed over or kept)", "sessions", len(ids))
}

// waitHandOver starts session id's handover unless it ran already, and waits for its end (or ctx's).
func (n *Node) waitHandOver(ctx context.Context, id string) {
	n.drain.mu.Lock()
	done, started := n.drain.handoffs[id]
	if !started && n.drain.ended {
		n.drain.mu.Unlock()
		return // the service closes: what is left is released at exit
	}
	if !started {
		done = make(chan struct{})
		n.drain.handoffs[id] = done
		n.drain.running.Add(1)
		go func() {
			defer n.drain.running.Done()
			defer close(done)
			n.handOver(n.drain.ctx, id)
		}()
	}
	n.drain.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// EndHandovers stops the handovers still waiting for a turn (one that outlived the grace period)
// and waits for those under way, so none runs beside the service's Close; the sessions left are
// released at exit (Drain). No handover starts after it.
func (n *Node) EndHandovers() {
	n.drain.mu.Lock()
	n.drain.ended = true
	cancel := n.drain.cancel
	n.drain.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	n.drain.running.Wait()
}

// handOver hands session id over and releases it in the store, so the next claim (by any node)
// restores the checkpoint just written; a session whose checkpoint failed stays here. A release the
// store refused (a dropped connection, a failover) is tried again until it lands or the drain ends:
// the session is no longer served here, and until it is released no other node may claim it (it
// stayed owned by this node until the lease ran out after exit, and requests bounced meanwhile).
// Requests for it wait for this (waitHandOver). What is still held when the drain ends is released
// at exit (Drain).
func (n *Node) handOver(ctx context.Context, id string) {
	if _, held := n.o.Ownership.Held(id); !held {
		return
	}
	if h, ok := n.o.Sessions.(handing); ok {
		if _, err := h.Handover(ctx, id); err != nil {
			n.log.Warn("session kept on the draining node: its handover failed", "session", id, "err", err)
			return
		}
	}
	for wait := releaseRetry; ; wait = min(2*wait, time.Second) {
		err := n.o.Ownership.Release(ctx, id)
		if err == nil {
			n.log.Info("session handed over", "session", id)
			return
		}
		n.log.Warn("handed-over session not released yet; trying again", "session", id, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			n.log.Warn("handed-over session not released before the drain ended; released at exit", "session", id)
			return
		case <-time.After(wait):
		}
	}
}

// releaseRetry is the first wait before a refused release is tried again (doubling to 1 s).
const releaseRetry = 50 * time.Millisecond

// routeDraining is route on a draining node: a session is handed over first (waiting for its turn
// in flight), then served by its owner if another node claimed it already, else sent to the peer
// with the most room, which claims it. A request another node sent here is answered 421 instead
// (the client retries through a live node). With no peer to take it, the session is claimed here.
func (n *Node) routeDraining(ctx context.Context, id string, hopped bool) (where, error) {
	n.waitHandOver(ctx, id)
	if _, held := n.o.Ownership.Held(id); held && n.o.Sessions.Has(id) {
		return where{local: true}, nil // its handover failed: served here until the node stops
	}
	o, err := n.o.Ownership.Owner(ctx, id)
	switch {
	case errors.Is(err, carryover.ErrNotFound):
		return where{owner: o, local: true}, nil // let the API answer its own 404
	case err != nil:
		return where{owner: o}, err
	case o.Node != "" && o.Node != n.o.Node.ID:
		return where{owner: o}, nil
	}
	target := n.drainTarget()
	switch {
	case target == nil:
		return n.claimHere(ctx, id)
	case hopped:
		return where{owner: carryover.Owner{Epoch: o.Epoch}}, nil // 421: retried through a live node
	}
	n.peers.debit(target.ID)
	return where{owner: carryover.Owner{Node: target.ID, Addr: target.Addr, Epoch: o.Epoch}, placed: true}, nil
}

// drainTarget is the peer a draining node sends a session to: the one with the most free slots,
// else the most idle kernels to hibernate; nil when no peer has room (draining peers publish none).
func (n *Node) drainTarget() *carryover.NodeState {
	others, _ := n.peers.others(n.o.Node.ID)
	if t := n.best(others, freeSlots); t != nil {
		return t
	}
	return n.best(others, idleKernels)
}

// claimHere claims session id for this node (one claim at a time), as route does for a session
// nobody serves.
func (n *Node) claimHere(ctx context.Context, id string) (where, error) {
	n.claimMu.Lock()
	defer n.claimMu.Unlock()
	if _, held := n.o.Ownership.Held(id); held {
		if !n.o.Sessions.Has(id) {
			if err := n.o.Sessions.Adopt(ctx, id); err != nil {
				return where{}, err
			}
		}
		return where{local: true}, nil
	}
	return n.claim(ctx, id)
}

// load is this node's load as it publishes and weighs it: a draining node has no room, so no peer
// places a session on it and its own placement sends every wake to a peer.
func (n *Node) load() carryover.NodeLoad {
	l := n.o.Sessions.Load()
	if n.Draining() {
		l.Capacity, l.Idle = l.Live+l.Queued, 0
		if l.Capacity == 0 {
			l.Capacity, l.Live = 1, 1
		}
	}
	return l
}

// readWhileDraining reports whether r, a read of session id, is answered by this draining node at
// once, as before the drain: the session is still here (its handover may be waiting for a long turn
// in flight, and a read need not wait for it). Anything else, websockets included, waits for the
// handover and goes to the next owner (routeDraining).
func (n *Node) readWhileDraining(r *http.Request, id string) bool {
	if !n.Draining() || r.Method != http.MethodGet || r.Header.Get("Upgrade") != "" || !n.leaseValid() {
		return false
	}
	_, held := n.o.Ownership.Held(id)
	return held && n.o.Sessions.Has(id)
}

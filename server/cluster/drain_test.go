package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// ledger records, in order, what a draining node did to its sessions and to the store.
type ledger struct {
	mu   sync.Mutex
	log  []string
	held map[string]bool
	// refuse: how many releases of a session the store refuses before one lands
	refuse map[string]int
}

func (l *ledger) note(s string) { l.mu.Lock(); l.log = append(l.log, s); l.mu.Unlock() }

// drainStore is the ownership a drain test sees: sessions held here, released on Release.
type drainStore struct{ *ledger }

func (drainStore) Heartbeat(context.Context, time.Duration, carryover.NodeLoad) error { return nil }
func (drainStore) Nodes(context.Context) ([]carryover.NodeState, error)               { return nil, nil }
func (d drainStore) Claim(_ context.Context, id string) (int64, error) {
	d.note("claim " + id)
	return 1, nil
}
func (d drainStore) Release(_ context.Context, id string) error {
	d.mu.Lock()
	if d.refuse[id] > 0 {
		d.refuse[id]--
		d.mu.Unlock()
		return errors.New("connection reset")
	}
	delete(d.held, id)
	d.mu.Unlock()
	d.note("release " + id)
	return nil
}
func (d drainStore) Owner(_ context.Context, id string) (carryover.Owner, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held[id] {
		return carryover.Owner{Node: "a", Addr: "http://a", Epoch: 1}, nil
	}
	return carryover.Owner{Epoch: 1}, nil
}
func (drainStore) Owners(context.Context) (map[string]carryover.Owner, error) { return nil, nil }
func (d drainStore) Held(id string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return 1, d.held[id]
}
func (drainStore) Forget() {}

// drainSessions is the service: Handover of "bad" fails (its checkpoint), of "busy" waits for turn.
type drainSessions struct {
	loadOnly
	*ledger
	here map[string]bool
	turn chan struct{} // closed when busy's turn in flight ends
}

func (d drainSessions) Has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.here[id]
}
func (d drainSessions) IDs() []string { return []string{"bad", "busy", "idle"} }
func (d drainSessions) Handover(_ context.Context, id string) (bool, error) {
	switch id {
	case "bad":
		d.note("handover failed " + id)
		return false, errors.New("checkpoint failed")
	case "busy":
		<-d.turn
	}
	d.note("handover " + id)
	d.mu.Lock()
	delete(d.here, id)
	d.mu.Unlock()
	return true, nil
}

// TestDrainOrder: a draining node hands each session over (checkpointed and dropped from the
// service) before it releases it in the store, each as soon as it is idle (an idle one does not
// wait for a busy one's turn); one whose handover failed stays held and served here. From the
// drain's start the node is not ready and publishes no room; a request for a handed-over session
// goes to the peer with room (placed: the peer claims it), never claimed here, and one another
// node sent is answered 421. A release the store refused is tried again before the request goes on.
func TestDrainOrder(t *testing.T) {
	l := &ledger{held: map[string]bool{"bad": true, "busy": true, "idle": true}, refuse: map[string]int{"idle": 2}}
	svc := drainSessions{loadOnly: loadOnly{carryover.NodeLoad{Live: 3, Capacity: 8, Idle: 2}}, ledger: l,
		here: map[string]bool{"bad": true, "busy": true, "idle": true}, turn: make(chan struct{})}
	n := New(Options{Node: carryover.NodeInfo{ID: "a", Addr: "http://a"}, Ownership: drainStore{l}, Sessions: svc,
		Heartbeat: time.Second, TTL: time.Hour})
	n.lastOK.Store(int64(time.Since(n.epoch)))
	n.peers.set([]carryover.NodeState{state("a", svc.NodeLoad), state("b", carryover.NodeLoad{Live: 1, Capacity: 8})})
	if err := n.Ready(); err != nil {
		t.Fatalf("ready before the drain: %v", err)
	}
	n.BeginDrain(t.Context()) // as Shutdown does, before it waits for the handovers
	done := make(chan struct{})
	go func() { n.HandOver(t.Context()); close(done) }()
	to, err := n.route(t.Context(), "idle", false) // waits for idle's handover only
	if err != nil || !to.placed || to.owner.Node != "b" {
		t.Fatalf("a request for the handed-over idle session: %+v %v, want it placed on b", to, err)
	}
	if _, held := n.o.Ownership.Held("idle"); held { // its first two releases were refused
		t.Fatal("the request was sent to b while idle was still held here: b cannot claim it")
	}
	if err := n.Ready(); err == nil {
		t.Fatal("ready while draining")
	}
	if l := n.load(); l.HasRoom() {
		t.Fatalf("a draining node publishes room: %+v", l)
	}
	if to, err := n.route(t.Context(), "bad", false); err != nil || !to.local {
		t.Fatalf("the session whose handover failed: %+v %v, want it served here", to, err)
	}
	close(svc.turn)
	<-done
	if to, err := n.route(t.Context(), "busy", true); err != nil || to.local || to.owner.Addr != "" {
		t.Fatalf("a request another node sent for a handed-over session: %+v %v, want 421", to, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	want := []string{"handover failed bad", "handover idle", "release idle", "handover busy", "release busy"}
	got := slices.DeleteFunc(slices.Clone(l.log), func(s string) bool { return s == "handover failed bad" })
	if !slices.Equal(got, want[1:]) || !slices.Contains(l.log, want[0]) || !l.held["bad"] {
		t.Fatalf("drain did %q (bad still held: %v), want %q in this order for idle and busy, and bad kept", l.log, l.held["bad"], want)
	}
}

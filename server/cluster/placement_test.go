package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// loadOnly is the node's session service as placement sees it: its load, nothing else.
type loadOnly struct{ carryover.NodeLoad }

func (l loadOnly) Load() carryover.NodeLoad                             { return l.NodeLoad }
func (loadOnly) Evict(string) bool                                      { return false }
func (loadOnly) Adopt(context.Context, string) error                    { return nil }
func (loadOnly) Has(string) bool                                        { return false }
func (loadOnly) IDs() []string                                          { return nil }
func (loadOnly) ReattachTarget(context.Context, string) (string, error) { return "", nil }

func state(id string, l carryover.NodeLoad) carryover.NodeState {
	return carryover.NodeState{NodeInfo: carryover.NodeInfo{ID: id, Addr: "http://" + id}, Load: l, Published: true}
}

// TestPlace: the order of placement. A free slot here wins (no hop); then the peer with the most
// free slots (a hop is cheaper than a hibernation); then an idle session here to hibernate; then the
// peer with the most idle kernels; else the cluster is full. The view holds this node too, which is
// never a peer. A peer of an older build publishes no load: it is never chosen, but while one lives
// the cluster is not called full (it may have room), and the session stays here as before.
func TestPlace(t *testing.T) {
	busy := carryover.NodeLoad{Live: 2, Capacity: 2}
	idle := carryover.NodeLoad{Live: 2, Capacity: 2, Idle: 1}
	for _, tc := range []struct {
		name  string
		local carryover.NodeLoad
		view  []carryover.NodeState
		want  string // "" here, "!" full
	}{
		{"free here", carryover.NodeLoad{Live: 1, Capacity: 2}, []carryover.NodeState{state("b", carryover.NodeLoad{Capacity: 9})}, ""},
		{"no bound here", carryover.NodeLoad{Live: 5}, nil, ""},
		{"most free peer", idle, []carryover.NodeState{state("a", idle), state("b", carryover.NodeLoad{Live: 1, Capacity: 2}),
			state("c", carryover.NodeLoad{Live: 1, Capacity: 4})}, "c"},
		{"unbounded peer", busy, []carryover.NodeState{state("b", carryover.NodeLoad{Live: 1, Capacity: 4}), state("c", carryover.NodeLoad{Live: 9})}, "c"},
		{"idle here before idle peer", idle, []carryover.NodeState{state("b", carryover.NodeLoad{Live: 2, Capacity: 2, Idle: 2})}, ""},
		{"idle peer", busy, []carryover.NodeState{state("b", carryover.NodeLoad{Live: 2, Capacity: 2, Idle: 1, Queued: 1}),
			state("c", idle)}, "c"},
		{"queued peer is full", busy, []carryover.NodeState{state("b", carryover.NodeLoad{Live: 1, Capacity: 2, Queued: 1})}, "!"},
		{"full", busy, []carryover.NodeState{state("a", busy), state("b", busy)}, "!"},
		{"full but for an older build", busy, []carryover.NodeState{state("b", busy),
			{NodeInfo: carryover.NodeInfo{ID: "c", Addr: "http://c"}}}, ""},
	} {
		n := New(Options{Node: carryover.NodeInfo{ID: "a"}, Sessions: loadOnly{tc.local}, Heartbeat: time.Second})
		n.peers.set(tc.view)
		target, full := n.place()
		got := ""
		switch {
		case full != nil:
			got = "!"
		case target != nil:
			got = target.ID
		}
		if got != tc.want {
			t.Errorf("%s: placed on %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPlaceSpreadsABurst: each session sent to a peer is counted in the view until the next read, so
// a burst through a full node fills the peers' free slots one by one, then finds the cluster full.
func TestPlaceSpreadsABurst(t *testing.T) {
	n := New(Options{Node: carryover.NodeInfo{ID: "a"}, Sessions: loadOnly{carryover.NodeLoad{Live: 1, Capacity: 1}}, Heartbeat: time.Second})
	n.peers.set([]carryover.NodeState{state("b", carryover.NodeLoad{Capacity: 2}), state("c", carryover.NodeLoad{Live: 1, Capacity: 2})})
	var got []string
	for range 3 {
		target, full := n.place()
		switch {
		case full != nil:
			got = append(got, "!")
		case target != nil:
			got = append(got, target.ID)
		}
	}
	slices.Sort(got)
	if want := "b b c"; strings.Join(got, " ") != want {
		t.Fatalf("burst placed on %q, want %q", strings.Join(got, " "), want)
	}
	if target, full := n.place(); full == nil {
		t.Fatalf("the fourth placed on %v, want the cluster full", target)
	}
}

// TestPlaceEqualsSpread: peers with equal room are ranked per receiving node, so nodes that place at
// once with the same view do not all choose the same peer.
func TestPlaceEqualsSpread(t *testing.T) {
	chosen := map[string]int{}
	for i := range 20 {
		n := New(Options{Node: carryover.NodeInfo{ID: fmt.Sprint("n", i)}, Sessions: loadOnly{carryover.NodeLoad{Live: 1, Capacity: 1}}})
		n.peers.set([]carryover.NodeState{state("b", carryover.NodeLoad{Capacity: 2}), state("c", carryover.NodeLoad{Capacity: 2})})
		target, _ := n.place()
		chosen[target.ID]++
	}
	if chosen["b"] == 0 || chosen["c"] == 0 {
		t.Fatalf("20 nodes chose %v: every one the same peer", chosen)
	}
}

package clustertest

import (
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// listed is what GET /api/sessions through n says of each session: id -> owner_node ("" for null).
func listed(t *testing.T, n *node) map[string]string {
	t.Helper()
	var body struct {
		Sessions []struct {
			ID        string  `json:"id"`
			OwnerNode *string `json:"owner_node"`
		} `json:"sessions"`
	}
	if err := n.c.Do(t.Context(), "GET", "/api/sessions", nil, &body); err != nil {
		t.Fatalf("list through %s: %v", n.name, err)
	}
	out := map[string]string{}
	for _, s := range body.Sessions {
		out[s.ID] = ""
		if s.OwnerNode != nil {
			out[s.ID] = *s.OwnerNode
		}
	}
	return out
}

// TestListSpansNodes: GET /api/sessions on any node lists every session of the shared store with
// its owner_node, not only those the node serves; once the owner is dead past its TTL the session
// is still listed, with owner_node null, and listing does not claim it.
func TestListSpansNodes(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	for _, c := range []struct {
		n  *node
		id string
	}{{a, "la"}, {b, "lb"}} {
		if _, err := c.n.c.CreateSession(t.Context(), client.CreateRequest{SessionID: c.id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []*node{a, b} {
		got := listed(t, n)
		if len(got) != 2 || got["la"] != "a" || got["lb"] != "b" {
			t.Fatalf("listed through %s: %v, want la on a and lb on b", n.name, got)
		}
	}
	a.kill()
	eventually(t, 4*testTTL, "a's session listed without owner once a's TTL ran out", func() bool {
		got := listed(t, b)
		own, ok := got["la"]
		return ok && own == "" && got["lb"] == "b"
	})
	if got := listed(t, b); got["la"] != "" {
		t.Fatalf("listing claimed la: %v", got)
	}
}

// TestReattachThroughNonOwner: POST /api/sessions/reattach through node B finds, by client_id, a
// session A owns (in the shared store) and is served by A, not by a second copy on B.
func TestReattachThroughNonOwner(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "r1", ClientID: "agent-7"}); err != nil {
		t.Fatal(err)
	}
	s, err := b.c.Reattach(t.Context(), "agent-7")
	if err != nil || s.ID != "r1" {
		t.Fatalf("reattach through b: %+v %v", s, err)
	}
	if owner := ownerNodeOf(t, b, "r1"); owner != "a" {
		t.Fatalf("r1 served by %s after the reattach through b, want a", owner)
	}
	if st := hopStatus(t, b, "r1"); st != 421 {
		t.Fatalf("b serves r1 itself after the reattach (hop GET answered %d, want 421)", st)
	}
	if _, err := b.c.Reattach(t.Context(), "nobody"); client.ErrorCode(err) != "not_found" {
		t.Fatalf("reattach of an unknown client through b: %v, want not_found", err)
	}
}

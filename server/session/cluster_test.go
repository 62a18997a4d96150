package session

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
	"github.com/carryover/carryover/server/session/stream"
)

// clusterStore is the mock store with the one Ownership call listings make (Owners).
type clusterStore struct {
	*mock.Store
	carryover.Ownership // nil: only Owners is called
	owners              map[string]carryover.Owner
}

func (c clusterStore) Owners(context.Context) (map[string]carryover.Owner, error) {
	return c.owners, nil
}

func TestAdoptEvict(t *testing.T) {
	ctx := context.Background()
	store := mock.NewStore()
	s := testServiceOn(t, store, &mock.Provisioner{}, func(c *Config) { c.NodeID = "b" })
	// Another node made "x" and was running it.
	a := "a"
	doc, _ := json.Marshal(carryover.Session{ID: "x", State: carryover.StateRotating, OwnerNode: &a,
		Sandbox: carryover.Sandbox{Status: carryover.SandboxLive}})
	if err := store.CreateSession(ctx, carryover.SessionRecord{ID: "x", Doc: doc}); err != nil {
		t.Fatal(err)
	}
	if s.Has("x") {
		t.Fatal("has a session before adopting it")
	}
	if err := s.Adopt(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("x")
	if err != nil || got.State != carryover.StateRunning || got.Sandbox.Status != carryover.SandboxHibernated || *got.OwnerNode != "b" {
		t.Fatalf("adopted = %+v, %v", got, err)
	}
	if err := s.Adopt(ctx, "nope"); carryover.ErrorCode(err) != carryover.CodeNotFound {
		t.Fatalf("Adopt of an unknown session: %v", err)
	}

	sub := stream.NewSubscriber()
	handleOf(t, s, "x").Attach(sub)
	if !s.Evict("x") || s.Evict("x") {
		t.Fatal("Evict does not report whether the session was here")
	}
	if f := nextFrame(t, sub); f["error"].(map[string]any)["code"] != string(carryover.CodeNotOwner) {
		t.Fatalf("frame = %v, want not_owner", f)
	}
	if s.Has("x") || len(s.IDs()) != 0 {
		t.Fatal("an evicted session is still served")
	}
}

func TestListAllInACluster(t *testing.T) {
	ctx := context.Background()
	cs := clusterStore{Store: mock.NewStore(), owners: map[string]carryover.Owner{"there": {Node: "a", Addr: "http://a"}}}
	cfg := testConfig(t)
	cfg.NodeID = "b"
	s, err := NewService(ctx, Options{Config: cfg, Store: cs, Provisioner: &mock.Provisioner{}, Spec: testSpec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	mustCreate(t, s, CreateRequest{SessionID: "here"})
	doc, _ := json.Marshal(carryover.Session{ID: "there", Name: "theirs", CreatedAt: time.Now().Add(time.Hour)}) // newer
	if err := cs.CreateSession(ctx, carryover.SessionRecord{ID: "there", Doc: doc}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids, owners []string
	for _, d := range all {
		ids = append(ids, d.ID)
		o := "-"
		if d.OwnerNode != nil {
			o = *d.OwnerNode
		}
		owners = append(owners, o)
	}
	if !slices.Equal(ids, []string{"here", "there"}) || !slices.Equal(owners, []string{"-", "a"}) {
		t.Fatalf("ListAll = %v owned by %v; want both, oldest first, owners from the store's live owners", ids, owners)
	}
	if len(s.List()) != 1 {
		t.Fatal("List shows sessions this node does not serve")
	}
}

func TestVisible(t *testing.T) {
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "v"})
	if !s.Visible("v", carryover.DefaultTenant) || s.Visible("v", "acme") || !s.Visible("unknown", "acme") {
		t.Fatal("Visible")
	}
}

// TestLookupOfMovedSession: a request routed here just before its session moved to another node
// (a handover, an eviction) finds it gone: it is told not_owner (421: its client retries at once
// and reaches the new owner), not not_found (404: the session would seem deleted). Adopted again, it
// is served; a session this node never had is still not_found.
func TestLookupOfMovedSession(t *testing.T) {
	ctx := context.Background()
	store := mock.NewStore()
	s := testServiceOn(t, store, &mock.Provisioner{}, func(c *Config) { c.NodeID = "a" })
	for _, id := range []string{"handed", "evicted"} {
		doc, _ := json.Marshal(carryover.Session{ID: id, State: carryover.StateRunning})
		if err := store.CreateSession(ctx, carryover.SessionRecord{ID: id, Doc: doc}); err != nil {
			t.Fatal(err)
		}
		if err := s.Adopt(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Handover(ctx, "handed"); !ok || err != nil {
		t.Fatalf("handover = %v, %v", ok, err)
	}
	s.Evict("evicted")
	for _, id := range []string{"handed", "evicted"} {
		if _, err := s.Get(id); carryover.ErrorCode(err) != carryover.CodeNotOwner {
			t.Errorf("lookup of %s after it moved: %v, want not_owner", id, err)
		}
	}
	if _, err := s.Get("never"); carryover.ErrorCode(err) != carryover.CodeNotFound {
		t.Errorf("lookup of a session never here: %v, want not_found", err)
	}
	if err := store.DeleteSession(ctx, "evicted"); err != nil { // deleted by its new owner
		t.Fatal(err)
	}
	if _, err := s.Get("evicted"); carryover.ErrorCode(err) != carryover.CodeNotFound {
		t.Errorf("lookup of a moved session deleted since: %v, want not_found", err)
	}
	if err := s.Adopt(ctx, "handed"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("handed"); err != nil {
		t.Errorf("lookup of a session adopted back: %v", err)
	}
}

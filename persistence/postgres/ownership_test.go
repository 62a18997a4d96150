package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/internal/pgtest"
)

// nodeStore opens a store on dsn as cluster node id, alive for ttl.
func nodeStore(t *testing.T, dsn, id string, ttl time.Duration) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{Node: carryover.NodeInfo{ID: id, Addr: "http://" + id}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Heartbeat(context.Background(), ttl, carryover.NodeLoad{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// expire lets node s's heartbeat lapse: it heartbeats with a tiny TTL and waits until the database
// sees it expired (polling the database, not a timed assertion).
func expire(t *testing.T, s *Store, other *Store, sessionID string) {
	t.Helper()
	if err := s.Heartbeat(context.Background(), time.Millisecond, carryover.NodeLoad{}); err != nil {
		t.Fatal(err)
	}
	for {
		o, err := other.Owner(context.Background(), sessionID)
		if err != nil {
			t.Fatal(err)
		}
		if o.Node == "" {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wantNotOwner(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, carryover.ErrNotOwner) {
		t.Fatalf("%s: %v, want not_owner", what, err)
	}
}

// TestClaimRace (scenario 3): eight nodes claim a session whose owner's heartbeat expired, all at
// once: exactly one wins, at the next epoch; the others are told who owns it.
func TestClaimRace(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a := nodeStore(t, dsn, "a", time.Minute)
	sessionT(t, a, "s")
	if o, _ := a.Owner(context.Background(), "s"); o.Node != "a" || o.Epoch != 1 || o.Addr != "http://a" {
		t.Fatalf("creator is not the owner: %+v", o)
	}
	var nodes []*Store
	for i := range 8 {
		nodes = append(nodes, nodeStore(t, dsn, fmt.Sprint("n", i), time.Minute))
	}
	if _, err := nodes[0].Claim(context.Background(), "s"); !errors.Is(err, carryover.ErrNotOwner) {
		t.Fatalf("claim of a session with a live owner: %v", err)
	}
	expire(t, a, nodes[0], "s")
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		wins   []string
		epochs []int64
	)
	start := make(chan struct{})
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e, err := n.Claim(context.Background(), "s")
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins, epochs = append(wins, n.opts.Node.ID), append(epochs, e)
			} else if !errors.Is(err, carryover.ErrNotOwner) {
				t.Errorf("claim by %s: %v", n.opts.Node.ID, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(wins) != 1 || epochs[0] != 2 {
		t.Fatalf("winners %v at epochs %v, want exactly one at epoch 2", wins, epochs)
	}
	if o, _ := a.Owner(context.Background(), "s"); o.Node != wins[0] || o.Epoch != 2 {
		t.Fatalf("owner %+v, want %s at 2", o, wins[0])
	}
}

// TestFencedWrites (scenario 2 in the store): node A owns a session; its heartbeat lapses (a pause)
// and B claims it. Every write A then attempts fails with not_owner and changes nothing; B's writes
// continue the event log without gap or repeat. A release hands the session over at once.
func TestFencedWrites(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t)
	a, b := nodeStore(t, dsn, "a", time.Minute), nodeStore(t, dsn, "b", time.Minute)
	if err := a.CreateSession(ctx, carryover.SessionRecord{ID: "s", State: "running", Doc: []byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := a.AppendEvent(ctx, "s", "status", i); err != nil {
			t.Fatal(err)
		}
	}
	putCommit(t, a, "s", "c1", rawChunk([]byte("turn 1")))
	if _, err := b.AppendEvent(ctx, "s", "status", "b"); !errors.Is(err, carryover.ErrNotOwner) {
		t.Fatalf("a non-owner appended: %v", err)
	}

	expire(t, a, b, "s")
	if e, err := b.Claim(ctx, "s"); err != nil || e != 2 {
		t.Fatalf("b's claim: %d %v", e, err)
	}
	// A resumes and writes as if it still owned the session.
	_, err := a.AppendEvent(ctx, "s", "status", "stale")
	wantNotOwner(t, "append", err)
	wantNotOwner(t, "update", a.UpdateSession(ctx, carryover.SessionRecord{ID: "s", State: "closed", Doc: []byte(`{"v":"stale"}`)}))
	_, err = a.InsertExecution(ctx, carryover.Execution{SessionID: "s", Kind: "run", Code: "x", Status: "ok"})
	wantNotOwner(t, "execution", err)
	wantNotOwner(t, "tool", a.PutTool(ctx, carryover.Tool{SessionID: "s", Name: "t", ToolType: "python"}))
	w, _ := a.BeginCheckpoint(ctx)
	c := rawChunk([]byte("stale turn"))
	if _, err := w.PutChunks(ctx, []carryover.ChunkInput{c}); err != nil {
		t.Fatal(err) // chunks are content, not session state: storing one is harmless
	}
	wantNotOwner(t, "commit", w.Commit(ctx, carryover.Checkpoint{ID: "stale", SessionID: "s", Roots: []string{c.Hash}}))
	w.Close()
	_, err = a.Prune(ctx, "s", 1)
	wantNotOwner(t, "prune", err)
	wantNotOwner(t, "delete", a.DeleteSession(ctx, "s"))
	if _, held := a.Held("s"); held {
		t.Fatal("a still believes it holds the session")
	}

	r, _ := b.GetSession(ctx, "s")
	if string(r.Doc) != `{"v":1}` || r.State != "running" {
		t.Fatalf("a fenced write changed the session: %+v", r)
	}
	if cp, err := b.LatestCheckpoint(ctx, "s"); err != nil || cp.ID != "c1" {
		t.Fatalf("latest checkpoint %+v %v", cp, err)
	}
	if ex, _ := b.ListExecutions(ctx, "s", 0); len(ex) != 0 {
		t.Fatalf("a fenced execution was recorded: %+v", ex)
	}
	ev, err := b.AppendEvent(ctx, "s", "status", "b")
	if err != nil || ev.SequenceNumber != 4 {
		t.Fatalf("b's append: %+v %v, want number 4", ev, err)
	}

	// A planned hand-over: B releases, A (alive again) claims at once, without waiting for a TTL.
	if err := a.Heartbeat(ctx, time.Minute, carryover.NodeLoad{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if e, err := a.Claim(ctx, "s"); err != nil || e != 3 {
		t.Fatalf("claim after release: %d %v", e, err)
	}
	_, err = b.AppendEvent(ctx, "s", "status", "after release")
	wantNotOwner(t, "append after release", err)
}

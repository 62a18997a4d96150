package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
	"github.com/carryover/carryover/persistence/sqlite"
)

// failingStore is a store whose CreateSession fails from its failAt-th call on (0: never).
type failingStore struct {
	carryover.Store
	calls, failAt atomic.Int32
}

func (f *failingStore) CreateSession(ctx context.Context, r carryover.SessionRecord) error {
	if n := f.calls.Add(1); f.failAt.Load() > 0 && n >= f.failAt.Load() {
		return errors.New("disk full")
	}
	return f.Store.CreateSession(ctx, r)
}

// forkService is a service on SQLite (the mock keeps no checkpoints) whose tenant "t" may hold 6
// sessions, with session "src" of tenant t holding one checkpoint (committed directly: no kernel).
func forkService(t *testing.T) (*Service, *failingStore) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store := &failingStore{Store: db}
	cfg := testConfig(t)
	cfg.Quotas = func(tenant string) carryover.Quotas {
		if tenant == "t" {
			return carryover.Quotas{Sessions: 6}
		}
		return carryover.Quotas{}
	}
	s, err := NewService(context.Background(), Options{Config: cfg, Store: store, Provisioner: &mock.Provisioner{},
		Spec: testSpec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if _, err := s.Create(carryover.NewContextWithTenant(context.Background(), "t"), CreateRequest{SessionID: "src"}); err != nil {
		t.Fatal(err)
	}
	w, err := db.BeginCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Commit(context.Background(), carryover.Checkpoint{ID: "ckpt_src", SessionID: "src", Turn: 3, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	return s, store
}

func count(n int) *int { return &n }

// wantSessions fails unless the service holds exactly ids.
func wantSessions(t *testing.T, s *Service, ids ...string) {
	t.Helper()
	var got []string
	for _, d := range s.List() {
		got = append(got, d.ID)
	}
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("sessions %v, want %v", got, ids)
	}
}

// TestForkManyAllOrNothing: a count out of 1..100, a fan-out the tenant's sessions quota cannot
// hold whole, a taken child id, each creates nothing; a fan-out that fits makes every child
// (named prefix-1..prefix-N, pending, no kernel, each its own checkpoint of the source's turn);
// the quota then refuses even one more.
func TestForkManyAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := forkService(t)
	for _, n := range []int{0, -1, MaxForkCount + 1} {
		_, err := s.ForkMany(ctx, "src", ForkRequest{Count: count(n)})
		wantCode(t, err, carryover.CodeInvalid)
		if e := carryover.ErrorOf(err); e.Details["field"] != "count" {
			t.Fatalf("count %d: details %v", n, e.Details)
		}
	}
	_, err := s.ForkMany(ctx, "src", ForkRequest{Count: count(6), SessionID: "kid"}) // 1 + 6 > 6
	wantCode(t, err, carryover.CodeQuotaExceeded)
	if e := carryover.ErrorOf(err); e.Details["requested"] != 6 || e.Details["limit"] != 6 || e.Details["use"] != 1 ||
		!strings.Contains(e.Message, "room for 5") {
		t.Fatalf("refusal %q details %v", e.Message, e.Details)
	}
	wantSessions(t, s, "src")

	kids, err := s.ForkMany(ctx, "src", ForkRequest{Count: count(5), SessionID: "kid", CheckpointID: "ckpt_src"})
	if err != nil {
		t.Fatal(err)
	}
	cps := map[string]bool{}
	for i, k := range kids {
		if k.ID != fmt.Sprintf("kid-%d", i+1) || k.State != carryover.StatePending || k.Tenant != "t" ||
			k.LastCheckpoint == nil || k.LastCheckpoint.Turn != 3 || k.ExecutionCount != 3 || cps[k.LastCheckpoint.ID] {
			t.Fatalf("child %d: %+v", i, k)
		}
		cps[k.LastCheckpoint.ID] = true
		if ls := mustLive(t, s, k.ID); ls.currentKernel() != nil {
			t.Fatalf("child %s holds a kernel", k.ID)
		}
	}
	wantSessions(t, s, "src", "kid-1", "kid-2", "kid-3", "kid-4", "kid-5")
	_, err = s.ForkMany(ctx, "src", ForkRequest{Count: count(1)})
	wantCode(t, err, carryover.CodeQuotaExceeded)
	_, err = s.Fork(ctx, "src", ForkRequest{})
	wantCode(t, err, carryover.CodeQuotaExceeded)
	wantSessions(t, s, "src", "kid-1", "kid-2", "kid-3", "kid-4", "kid-5")
}

// TestForkManyRefusalsCreateNothing: a taken child id, a checkpoint that is not the source's, a
// child id made invalid by the prefix, and a store failing midway (the children already stored
// are deleted) each leave the sessions as they were; random ids are distinct.
func TestForkManyRefusalsCreateNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, store := forkService(t)
	if _, err := s.ForkMany(ctx, "src", ForkRequest{Count: count(1), SessionID: "one"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ForkMany(ctx, "src", ForkRequest{Count: count(2), SessionID: "one"}) // one-1, one-2: free
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ForkMany(ctx, "src", ForkRequest{Count: count(2), SessionID: "one"}) // one-1 taken now
	wantCode(t, err, carryover.CodeConflict)
	_, err = s.ForkMany(ctx, "src", ForkRequest{Count: count(2), CheckpointID: "ckpt_nope"})
	wantCode(t, err, carryover.CodeNotFound)
	_, err = s.ForkMany(ctx, "src", ForkRequest{Count: count(2), SessionID: strings.Repeat("x", 300)})
	wantCode(t, err, carryover.CodeInvalid)
	wantSessions(t, s, "src", "one", "one-1", "one-2")

	store.failAt.Store(store.calls.Load() + 2) // the second child's store fails
	_, err = s.ForkMany(ctx, "src", ForkRequest{Count: count(2), SessionID: "half"})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("fan-out on a failing store: %v", err)
	}
	wantSessions(t, s, "src", "one", "one-1", "one-2")
	if _, err := store.GetSession(ctx, "half-1"); !errors.Is(err, carryover.ErrNotFound) {
		t.Fatalf("the stored first child was not deleted: %v", err)
	}
	store.failAt.Store(0)
	kids, err := s.ForkMany(ctx, "src", ForkRequest{Count: count(2)})
	if err != nil {
		t.Fatal(err)
	}
	if kids[0].ID == kids[1].ID || !strings.HasPrefix(kids[0].ID, "sess_") {
		t.Fatalf("random ids %s %s", kids[0].ID, kids[1].ID)
	}
}

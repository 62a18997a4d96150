package server_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/persistence/sqlite"
	"github.com/carryover/carryover/server"
)

// syncWatchStore forwards to SQLite and notes, for one session, each session write and event
// appended while it watches, and whether it was made under carryover.DeferSync.
type syncWatchStore struct {
	carryover.Store
	id       string
	mu       sync.Mutex
	watching bool
	writes   []string // "<what> deferred" or "<what> durable"
}

func (s *syncWatchStore) note(ctx context.Context, id, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.watching || id != s.id {
		return
	}
	if carryover.SyncDeferred(ctx) {
		s.writes = append(s.writes, what+" deferred")
	} else {
		s.writes = append(s.writes, what+" durable")
	}
}

func (s *syncWatchStore) UpdateSession(ctx context.Context, r carryover.SessionRecord) error {
	s.note(ctx, r.ID, "session "+r.State)
	return s.Store.UpdateSession(ctx, r)
}

func (s *syncWatchStore) AppendEvent(ctx context.Context, id, typ string, payload any) (carryover.Event, error) {
	s.note(ctx, id, typ)
	return s.Store.AppendEvent(ctx, id, typ, payload)
}

// Sync keeps the SQLite store a carryover.Syncer through the wrapper (turns defer their flushes).
func (s *syncWatchStore) Sync(ctx context.Context) error { return s.Store.(carryover.Syncer).Sync(ctx) }

// TestAnEvictedSessionsWritesAreDurableOnTheirOwn: on a node of one live kernel, a turn of session
// b hibernates idle session a to claim the slot. That turn defers its own writes' flush to its end
// (carryover.DeferSync), but a's hibernation is not b's turn: its writes are flushed as they are
// made (carryover.SyncEach), so a's saved state never waits on a turn that may fail after a's
// kernel is gone.
func TestAnEvictedSessionsWritesAreDurableOnTheirOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inner, err := sqlite.Open(filepath.Join(dir, "carryover.db"))
	if err != nil {
		t.Fatal(err)
	}
	store := &syncWatchStore{Store: inner, id: "victim"}
	cfg := testConfig(dir)
	cfg.Capacity.MaxLiveKernels = 1
	cfg.Capacity.QueueSeconds = 60
	cfg.Pool.Size, cfg.Pool.MaxSize = 0, 0
	cfg.Cull.IdleSeconds = 0
	_, base := serveConfig(t, cfg, server.Parts{Store: store})
	c := newClient(base, testToken)
	ctx := t.Context()
	for _, id := range []string{"victim", "claimer"} {
		if _, err := c.CreateSession(ctx, client.CreateRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := c.Run(ctx, "victim", client.RunRequest{Code: "v = 7"}); err != nil || res.Status != "ok" {
		t.Fatalf("victim's run: %v %+v", err, res)
	}
	store.mu.Lock()
	store.watching = true
	store.mu.Unlock()
	if res, err := c.Run(ctx, "claimer", client.RunRequest{Code: "1+1"}); err != nil || res.Status != "ok" {
		t.Fatalf("claimer's run: %v %+v", err, res)
	}
	store.mu.Lock()
	store.watching = false
	got := append([]string(nil), store.writes...)
	store.mu.Unlock()
	hibernated := false
	for _, w := range got {
		if w == "session_hibernated durable" {
			hibernated = true
		}
		if len(w) > 9 && w[len(w)-9:] == " deferred" {
			t.Fatalf("the victim's write %q waited on the claiming turn's flush: %v", w, got)
		}
	}
	if !hibernated {
		t.Fatalf("the victim was not hibernated by the claiming turn: its writes %v", got)
	}
	if res, err := c.Run(ctx, "victim", client.RunRequest{Code: "v"}); err != nil || resultOf(res) != "7" {
		t.Fatalf("the victim after its wake: %v %+v", err, res)
	}
}

package session

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/mock"
)

// turnSyncStore is a mock store that can defer its flush (carryover.Syncer): it logs each session
// and event write, whether it was made under carryover.DeferSync, and each Sync.
type turnSyncStore struct {
	*mock.Store
	mu  sync.Mutex
	log []string // "write", "deferred" or "sync", in order
}

func (s *turnSyncStore) note(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if carryover.SyncDeferred(ctx) {
		s.log = append(s.log, "deferred")
	} else {
		s.log = append(s.log, "write")
	}
}

func (s *turnSyncStore) UpdateSession(ctx context.Context, r carryover.SessionRecord) error {
	s.note(ctx)
	return s.Store.UpdateSession(ctx, r)
}

func (s *turnSyncStore) AppendEvent(ctx context.Context, id, typ string, payload any) (carryover.Event, error) {
	s.note(ctx)
	return s.Store.AppendEvent(ctx, id, typ, payload)
}

func (s *turnSyncStore) Sync(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, "sync")
	return nil
}

// TestATurnsKernelClaimIsFlushedOnceWithTheTurn: a run's kernel claim writes the session's sandbox
// status (starting, then back to none when the launch fails); those writes ride on the turn's one
// flush instead of a flush each, and the flush comes before the run's error returns.
func TestATurnsKernelClaimIsFlushedOnceWithTheTurn(t *testing.T) {
	st := &turnSyncStore{Store: mock.NewStore()}
	prov := &mock.Provisioner{LaunchFn: func(context.Context, kernel.LaunchSpec) (kernel.KernelProcess, error) {
		return nil, mock.ErrNoKernels
	}}
	s, err := NewService(context.Background(), Options{Config: testConfig(t), Store: st, Provisioner: prov,
		Spec: testSpec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx := context.Background()
	mustCreate(t, s, CreateRequest{SessionID: "a"})
	st.mu.Lock()
	st.log = nil
	st.mu.Unlock()
	if _, err := handleOf(t, s, "a").Run(ctx, RunRequest{Code: "1+1"}, RunOptions{}); err == nil {
		t.Fatal("a run whose kernel cannot launch succeeded")
	}
	st.mu.Lock()
	got := append([]string(nil), st.log...)
	st.mu.Unlock()
	deferred := 0
	for _, e := range got {
		if e == "write" {
			t.Fatalf("a write of the turn flushed on its own: %v", got)
		}
		if e == "deferred" {
			deferred++
		}
	}
	if deferred == 0 {
		t.Fatalf("the claim wrote nothing (the test no longer sees its writes): %v", got)
	}
	if got[len(got)-1] != "sync" {
		t.Fatalf("the turn's writes were not flushed before its error returned: %v", got)
	}
}

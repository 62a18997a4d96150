package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/persistence/sqlite"
	"github.com/carryover/carryover/server"
)

// fencingStore is SQLite on a node that loses its sessions the moment a checkpoint commits while
// armed: onCommit runs right after the commit (the node fences itself: the service evicts the
// session), and from then on the session's writes are refused not_owner, as PostgreSQL's fence
// refuses a node whose lease lapsed.
type fencingStore struct {
	carryover.Store
	armed, fenced atomic.Bool
	onCommit      func()
}

type fencingWriter struct {
	carryover.CheckpointWriter
	s *fencingStore
}

func (f *fencingStore) BeginCheckpoint(ctx context.Context) (carryover.CheckpointWriter, error) {
	w, err := f.Store.BeginCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	return fencingWriter{CheckpointWriter: w, s: f}, nil
}

func (w fencingWriter) Commit(ctx context.Context, cp carryover.Checkpoint) error {
	if err := w.CheckpointWriter.Commit(ctx, cp); err != nil {
		return err
	}
	if w.s.armed.CompareAndSwap(true, false) {
		w.s.fenced.Store(true)
		w.s.onCommit()
	}
	return nil
}

func (f *fencingStore) refused(id string) error {
	return carryover.Errorf(carryover.CodeNotOwner, "session %q is not owned by node a (injected fence)", id)
}

func (f *fencingStore) UpdateSession(ctx context.Context, r carryover.SessionRecord) error {
	if f.fenced.Load() {
		return f.refused(r.ID)
	}
	return f.Store.UpdateSession(ctx, r)
}

func (f *fencingStore) InsertExecution(ctx context.Context, e carryover.Execution) (int64, error) {
	if f.fenced.Load() {
		return 0, f.refused(e.SessionID)
	}
	return f.Store.InsertExecution(ctx, e)
}

// fencedNode serves a server on a fencingStore and makes session id on it through its client.
func fencedNode(t *testing.T, id string) (*fencingStore, *server.Server, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	inner, err := sqlite.Open(filepath.Join(dir, "fenced.db"))
	if err != nil {
		t.Fatal(err)
	}
	store := &fencingStore{Store: inner}
	srv, base := serveServer(t, dir, server.Parts{Store: store})
	c := client.New(base, testToken)
	if _, err := c.CreateSession(t.Context(), client.CreateRequest{SessionID: id}); err != nil {
		t.Fatal(err)
	}
	return store, srv, c
}

// TestTurnSavedBeforeTheNodeLostItIsAnsweredAsRun: a node fences itself (its lease lapsed under
// load) after a turn's checkpoint committed and before the turn's record was written. The turn
// happened: the session's next owner restores that checkpoint. So its answer is the turn's own
// (200, its output), with record_error naming what was not written, never "not_owner: the run's
// effects were not saved", which a client retries into run_interrupted and then counts the turn
// twice (the chaos harness, under CPU overload: "turn 50 printed 51").
func TestTurnSavedBeforeTheNodeLostItIsAnsweredAsRun(t *testing.T) {
	t.Parallel()
	store, srv, c := fencedNode(t, "f")
	store.onCommit = func() { srv.Svc.Evict("f") }
	ctx := context.Background()
	if _, err := c.Run(ctx, "f", client.RunRequest{Code: "n = 1"}); err != nil {
		t.Fatal(err)
	}
	store.armed.Store(true)
	res, err := c.Run(ctx, "f", client.RunRequest{Code: "n += 1\nprint(n)"})
	if err != nil || res.Status != "ok" || res.Stdout != "2\n" || res.Checkpoint == nil {
		t.Fatalf("the turn saved before the fence: %v %+v, want ok, 2, its checkpoint", err, res)
	}
	if !strings.Contains(res.RecordError, "moved to another node") || !strings.Contains(res.RecordError, res.Checkpoint.ID) {
		t.Errorf("record_error = %q, want it to say the turn is saved (%s) though its record is not", res.RecordError, res.Checkpoint.ID)
	}
	// The node takes the session back (as a new owner would): it is the checkpoint's state.
	store.fenced.Store(false)
	if err := srv.Svc.Adopt(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Run(ctx, "f", client.RunRequest{Code: "print(n)"}); err != nil || res.Stdout != "2\n" {
		t.Fatalf("after the move: %v %+v, want the saved turn's 2", err, res)
	}
}

// TestTurnCutByTheNodesFenceSaysSo: a node that loses its session during a turn stops its kernel;
// the turn is answered kernel_died, saying the session moved and the run's effects were not saved.
func TestTurnCutByTheNodesFenceSaysSo(t *testing.T) {
	t.Parallel()
	store, srv, c := fencedNode(t, "cut")
	ctx := context.Background()
	started := filepath.Join(t.TempDir(), "started")
	go func() {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(started); err == nil {
				store.fenced.Store(true)
				srv.Svc.Evict("cut")
				return
			}
		}
	}()
	code := fmt.Sprintf("import time\nopen(%q, 'w').close()\ntime.sleep(60)", started)
	res, err := c.Run(ctx, "cut", client.RunRequest{Code: code})
	if client.ErrorCode(err) != "kernel_died" || !strings.Contains(err.Error(), "moved to another node") ||
		!strings.Contains(err.Error(), "not saved") {
		t.Fatalf("the turn cut by the fence: %v %+v, want kernel_died saying the session moved", err, res)
	}
}

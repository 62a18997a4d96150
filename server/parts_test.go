package server_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/persistence/sqlite"
	"github.com/carryover/carryover/server"
)

// countingStore is another backend as far as the server can tell: a carryover.Store that is not
// the one the config names. It forwards to SQLite and counts what the service asks of it.
type countingStore struct {
	carryover.Store
	events, checkpoints atomic.Int64
}

func (c *countingStore) AppendEvent(ctx context.Context, id, typ string, payload any) (carryover.Event, error) {
	c.events.Add(1)
	return c.Store.AppendEvent(ctx, id, typ, payload)
}

func (c *countingStore) BeginCheckpoint(ctx context.Context) (carryover.CheckpointWriter, error) {
	c.checkpoints.Add(1)
	return c.Store.BeginCheckpoint(ctx)
}

// TestAssembleWithAnotherStore drops a store of the caller's into the server (server.Parts): the
// service and the API use it for everything, with nothing in server/ knowing what it is.
func TestAssembleWithAnotherStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inner, err := sqlite.Open(filepath.Join(dir, "other.db"))
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: inner}
	c := client.New(serveParts(t, dir, server.Parts{Store: store}), testToken)
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, client.CreateRequest{SessionID: "other"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(ctx, "other", client.RunRequest{Code: "x = 41 + 1\nprint(x)"})
	if err != nil || res.Stdout != "42\n" || res.Checkpoint == nil {
		t.Fatalf("run: %v %+v", err, res)
	}
	if store.events.Load() == 0 || store.checkpoints.Load() == 0 {
		t.Errorf("the store given was not used: %d events, %d checkpoints", store.events.Load(), store.checkpoints.Load())
	}
	if got, err := inner.GetSession(ctx, "other"); err != nil || got.ID != "other" {
		t.Errorf("session not in the store given: %v", err)
	}
}

package session

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/mock"
)

// ctxStore is a mock store whose session writes fail once their context is done, as the real
// stores' do.
type ctxStore struct{ *mock.Store }

func (c ctxStore) UpdateSession(ctx context.Context, r carryover.SessionRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.Store.UpdateSession(ctx, r)
}

// TestAClaimGivenUpLeavesNoStartingStatus: a client that goes away while its session's kernel
// starts (the run's context cancelled during the launch) fails the claim; the session must not
// stay "starting" in memory or in the store, as it did when the status's reset was written with
// the cancelled context (seen as an ERROR "session not saved" in a loaded CI run).
func TestAClaimGivenUpLeavesNoStartingStatus(t *testing.T) {
	store, prov := mock.NewStore(), &mock.Provisioner{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prov.LaunchFn = func(lctx context.Context, _ kernel.LaunchSpec) (kernel.KernelProcess, error) {
		cancel() // the client goes away while the kernel starts
		<-lctx.Done()
		return nil, lctx.Err()
	}
	s, err := NewService(context.Background(), Options{Config: testConfig(t), Store: ctxStore{store}, Provisioner: prov,
		Spec: testSpec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if _, err := s.Create(context.Background(), CreateRequest{SessionID: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := handleOf(t, s, "gone").Run(ctx, RunRequest{Code: "1+1"}, RunOptions{}); err == nil {
		t.Fatal("the run succeeded with its client gone")
	}
	d, err := s.Get("gone")
	if err != nil {
		t.Fatal(err)
	}
	if d.Sandbox.Status == carryover.SandboxStarting {
		t.Errorf("in memory the session is still %q after its claim was given up", d.Sandbox.Status)
	}
	rec, err := store.GetSession(context.Background(), "gone")
	if err != nil {
		t.Fatal(err)
	}
	var stored carryover.Session
	if err := json.Unmarshal(rec.Doc, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Sandbox.Status == carryover.SandboxStarting {
		t.Errorf("in the store the session is still %q after its claim was given up", stored.Sandbox.Status)
	}
}

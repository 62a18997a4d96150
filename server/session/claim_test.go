package session

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/mock"
	"github.com/carryover/carryover/server/capacity"
)

// checkpointStore is a mock store that has one checkpoint for every session: enough for
// RestoreCheckpoint to reach its claim.
type checkpointStore struct {
	*mock.Store
}

func (checkpointStore) GetCheckpoint(_ context.Context, sessionID, id string) (carryover.Checkpoint, error) {
	return carryover.Checkpoint{ID: id, SessionID: sessionID, Turn: 1, CreatedAt: time.Now().UTC()}, nil
}

// holdKernel makes session id hold a live kernel of its tenant as the node counts it, until the
// test ends (a kernel that never ran: the unit tests start none).
func holdKernel(t *testing.T, s *Service, id string) {
	t.Helper()
	ls, err := s.Session(id)
	if err != nil {
		t.Fatal(err)
	}
	k := &kernel.Kernel{}
	lease, err := s.adm.ledger.Acquire(context.Background(), capacity.Claim{Tenant: ls.tenant()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.adm.leases.Store(k, lease)
	ls.mu.Lock()
	ls.kern = k
	ls.mu.Unlock()
	t.Cleanup(func() { // before the service's Close: this kernel has no process to stop
		ls.mu.Lock()
		ls.kern = nil
		ls.mu.Unlock()
		s.adm.releaseLease(k)
	})
}

// TestEveryClaimPathChecksTheTenantLimit: with a tenant quota of live_kernels 1 and another session
// of the tenant holding its one kernel, every path that claims a kernel (a first run, a hibernated
// session's wake, a rotation, an ephemeral run, a checkpoint restore) is refused with
// quota_exceeded naming live_kernels, before any kernel is launched.
func TestEveryClaimPathChecksTheTenantLimit(t *testing.T) {
	store, prov := mock.NewStore(), &mock.Provisioner{}
	var launches atomic.Int32
	prov.LaunchFn = func(context.Context, kernel.LaunchSpec) (kernel.KernelProcess, error) {
		launches.Add(1)
		return nil, mock.ErrNoKernels
	}
	cfg := testConfig(t)
	cfg.MaxLiveKernels = 8
	cfg.Quotas = func(string) carryover.Quotas { return carryover.Quotas{LiveKernels: 1} }
	s, err := NewService(context.Background(), Options{Config: cfg, Store: checkpointStore{store}, Provisioner: prov,
		Spec: testSpec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx := carryover.NewContextWithTenant(context.Background(), "small")
	for _, id := range []string{"holder", "first", "wake", "rotate", "restore"} {
		if _, err := s.Create(ctx, CreateRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	holdKernel(t, s, "holder")
	for _, id := range []string{"wake", "rotate", "restore"} { // running, their kernel hibernated
		ls, _ := s.Session(id)
		if _, err := ls.update(ctx, func(d *carryover.Session) error {
			d.State = carryover.StateRunning
			d.Sandbox.Status = carryover.SandboxHibernated
			d.ExecutionCount = 1
			d.LastCheckpoint = &carryover.CheckpointRef{ID: "ckpt_" + id, Turn: 1, CreatedAt: time.Now().UTC()}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	paths := []struct {
		name  string
		claim func() error
	}{
		{"first run", func() error {
			_, err := handleOf(t, s, "first").Run(ctx, RunRequest{Code: "1+1"}, RunOptions{})
			return err
		}},
		{"wake", func() error {
			_, err := handleOf(t, s, "wake").Run(ctx, RunRequest{Code: "1+1"}, RunOptions{})
			return err
		}},
		{"rotation", func() error { _, err := handleOf(t, s, "rotate").Rotate(ctx); return err }},
		{"ephemeral run", func() error {
			_, err := s.RunEphemeral(ctx, EphemeralRequest{Language: "python", Code: "1+1"})
			return err
		}},
		{"checkpoint restore", func() error { _, err := handleOf(t, s, "restore").RestoreCheckpoint(ctx, "ckpt_restore"); return err }},
	}
	for _, p := range paths {
		err := p.claim()
		e := carryover.ErrorOf(err)
		if err == nil || e.Code != carryover.CodeQuotaExceeded || e.Details["quota"] != carryover.QuotaLiveKernels {
			t.Errorf("%s: err = %v (details %v), want quota_exceeded on live_kernels", p.name, err, e.Details)
		}
	}
	if n := launches.Load(); n != 0 {
		t.Errorf("%d kernels launched for claims over the tenant's limit", n)
	}
	for _, id := range []string{"first", "wake", "rotate", "restore"} {
		if d, _ := s.Get(id); d.Sandbox.Status == carryover.SandboxLive || d.Sandbox.Status == carryover.SandboxStarting {
			t.Errorf("session %s: sandbox %s after a refused claim", id, d.Sandbox.Status)
		}
	}
}

// TestRefusedRestoreKeepsTheKernel: a checkpoint restore claims its new kernel before it lets the
// old one go (as a rotation does), so a restore refused at the tenant's live_kernels leaves the
// session on its kernel, still live and counted, its state and sandbox unchanged.
func TestRefusedRestoreKeepsTheKernel(t *testing.T) {
	store, prov := mock.NewStore(), &mock.Provisioner{}
	var launches atomic.Int32
	prov.LaunchFn = func(context.Context, kernel.LaunchSpec) (kernel.KernelProcess, error) {
		launches.Add(1)
		return nil, mock.ErrNoKernels
	}
	cfg := testConfig(t)
	cfg.MaxLiveKernels = 8
	cfg.Quotas = func(string) carryover.Quotas { return carryover.Quotas{LiveKernels: 1} }
	s, err := NewService(context.Background(), Options{Config: cfg, Store: checkpointStore{store}, Provisioner: prov,
		Spec: testSpec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	ctx := carryover.NewContextWithTenant(context.Background(), "small")
	for _, id := range []string{"holder", "restore"} {
		if _, err := s.Create(ctx, CreateRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	// Both hold a kernel (the quota was lowered to 1 since): the restore's claim counts the
	// holder's, not the kernel it replaces, and is refused.
	holdKernel(t, s, "holder")
	holdKernel(t, s, "restore")
	ls, _ := s.Session("restore")
	if _, err := ls.update(ctx, func(d *carryover.Session) error {
		d.State, d.Sandbox.Status = carryover.StateRunning, carryover.SandboxLive
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	k := ls.currentKernel()
	_, err = ls.RestoreCheckpoint(ctx, "ckpt_1")
	if e := carryover.ErrorOf(err); err == nil || e.Code != carryover.CodeQuotaExceeded {
		t.Fatalf("restore over the quota: %v, want quota_exceeded", err)
	}
	if ls.currentKernel() != k || s.adm.leaseOf(k) == nil {
		t.Fatal("the refused restore took the session's kernel away")
	}
	if d := ls.docCopy(); d.State != carryover.StateRunning || d.Sandbox.Status != carryover.SandboxLive {
		t.Fatalf("after the refused restore: state %s, sandbox %s", d.State, d.Sandbox.Status)
	}
	if n := launches.Load(); n != 0 {
		t.Errorf("%d kernels launched for a refused claim", n)
	}
}

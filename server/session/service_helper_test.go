package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/mock"
	"github.com/carryover/carryover/server/session/workspace"
)

// testConfig is a service config for unit tests: everything under a temp dir, no pool, no network.
func testConfig(t *testing.T) Config {
	dir := t.TempDir()
	return Config{
		DataDir:              dir,
		SpoolDir:             filepath.Join(dir, "spool"),
		Transport:            "ipc",
		DefaultRunTimeout:    30 * time.Second,
		MaxRunTimeoutSeconds: 600,
		MaxOutputBytes:       1 << 20,
		ChunkSize:            1 << 20,
		Retention:            3,
	}
}

// testSpec is a kernelspec no kernel can start from: unit tests never need one.
var testSpec = &kernel.Spec{Name: "python3", Argv: []string{"/nonexistent/python", "-f", "{connection_file}"}}

// testService builds a Service on a mock store and a mock provisioner: no SQLite, no Python, no
// kernel (the kernelspec is given, the pool is empty). edit, when not nil, changes the config first.
func testService(t *testing.T, edit func(*Config)) (*Service, *mock.Store, *mock.Provisioner) {
	t.Helper()
	store, prov := mock.NewStore(), &mock.Provisioner{}
	return testServiceOn(t, store, prov, edit), store, prov
}

// testServiceOn is testService on a given store and provisioner (a restart test reuses the store).
func testServiceOn(t *testing.T, store *mock.Store, prov *mock.Provisioner, edit func(*Config)) *Service {
	t.Helper()
	cfg := testConfig(t)
	if edit != nil {
		edit(&cfg)
	}
	s, err := NewService(context.Background(), Options{Config: cfg, Store: store, Provisioner: prov,
		Spec: testSpec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// wantCode fails unless err is a *carryover.Error of code.
func wantCode(t *testing.T, err error, code carryover.Code) {
	t.Helper()
	var e *carryover.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want a *carryover.Error of code %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%v), want %s", e.Code, err, code)
	}
}

// mustCreate creates a session or fails the test.
func mustCreate(t *testing.T, s *Service, req CreateRequest) carryover.Session {
	t.Helper()
	doc, err := s.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create(%+v): %v", req, err)
	}
	return doc
}

// handleOf is session id's handle; the test fails at once when there is none.
func handleOf(t *testing.T, s *Service, id string) *Session {
	t.Helper()
	ls, err := s.Session(id)
	if err != nil {
		t.Fatalf("session %q: %v", id, err)
	}
	return ls
}

// waitFor polls cond for up to a second.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// filesOf is session id's workspace directory; the test fails at once when there is none.
func filesOf(t *testing.T, s *Service, id string) workspace.Dir {
	t.Helper()
	d, err := s.Files(id)
	if err != nil {
		t.Fatalf("session %q: %v", id, err)
	}
	return d
}

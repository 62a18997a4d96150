package servertest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel/template"
	"github.com/carryover/carryover/server"
)

// Config is the tests' server config on data dir dir with token: a free loopback port, a warm pool
// of one kernel, no sandbox (the sandbox suites turn it on), a 1 MiB body limit, a 10 s shutdown grace and
// a 120 s kernel start timeout.
func Config(dir, token string) *configs.Config {
	cfg := configs.Default()
	cfg.DataDir = dir
	cfg.Server.Addr = "127.0.0.1:0"
	cfg.Auth.Token = token
	cfg.Pool.Size = 1
	cfg.Pool.MaxSize = 1            // no growth under the tests' back-to-back creates (the capacity tests turn it on)
	cfg.Persistence.PreImport = nil // ~0.8 s of CPU per refill, on a 2-core machine running tests in parallel; server's TestPoolKernelsArePreImported covers it
	cfg.Server.MaxBodyBytes = 1 << 20
	cfg.Server.ShutdownGraceSeconds = 10
	cfg.Sandbox.Enabled = false
	cfg.Kernel.StartupTimeoutSeconds = StartupTimeoutSeconds
	return cfg
}

// StartupTimeoutSeconds is the tests' kernel.startup_timeout_seconds (30 configured). make test runs
// every package at once, -race, on 2 cores: there a cold start took past 30 s (CI, 2026-11-29: a
// dozen tests' first turns answered 429 start_timeout at load ~30), which measured the machine, not
// the behaviour under test. The refusal itself is tested with a timeout no start can meet
// (server's TestKernelStartTimeoutAnswers429). The bench's servers use 120 s for the same reason.
const StartupTimeoutSeconds = 120

// Server is a carryover server running in the test's process.
type Server struct {
	*server.Server
	Base   string // http://127.0.0.1:PORT
	Config *configs.Config
	done   chan error
}

// New assembles cfg's server (log: nil for the default), listens and serves it; the caller stops it
// (Stop). For TestMain; a test calls Start.
func New(cfg *configs.Config, log *slog.Logger) (*Server, error) {
	return NewWithUI(cfg, nil, log)
}

// NewWithUI is New with ui served at /, as `carryover serve` serves the web UI (the benchmark's
// servers, internal/bench).
func NewWithUI(cfg *configs.Config, ui http.Handler, log *slog.Logger) (*Server, error) {
	return assemble(cfg, server.Parts{UI: ui, Logger: log})
}

// assemble builds the server of cfg from parts, listens and serves it.
func assemble(cfg *configs.Config, parts server.Parts) (*Server, error) {
	srv, err := server.Assemble(context.Background(), cfg, parts)
	if err != nil {
		return nil, fmt.Errorf("server.New: %w", err)
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	s := &Server{Server: srv, Base: "http://" + srv.Addr(), Config: cfg, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve() }()
	return s, nil
}

// templates are the kernel templates the in-process servers of Start share (kernel/template.Shared):
// a test binary starts a few hundred servers, and each template's start is ~0.7 s of CPU importing
// ipykernel, for servers that mostly fork a kernel or two. Their kernels are forked as each server's
// own template would fork them (same interpreter, pre-import set and environment).
var templates = template.NewShared()

// Start starts an in-process server with cfg, stopped when the test ends (or before, by Stop). Its
// kernel templates are shared with the process's other servers of Start.
func Start(t testing.TB, cfg *configs.Config) *Server {
	t.Helper()
	return start(t, cfg, templates)
}

// StartOwnTemplate is Start with kernel templates of the server's own, in its data dir as
// `carryover serve` has them: for a test that kills its template or looks for it there.
func StartOwnTemplate(t testing.TB, cfg *configs.Config) *Server {
	t.Helper()
	return start(t, cfg, nil)
}

func start(t testing.TB, cfg *configs.Config, shared *template.Shared) *Server {
	t.Helper()
	s, err := assemble(cfg, server.Parts{Templates: shared})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// Stop shuts the server down gracefully and waits until it served its last request (idempotent).
func (s *Server) Stop() error {
	if s.done == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := s.Shutdown(ctx)
	<-s.done
	s.done = nil
	return err
}

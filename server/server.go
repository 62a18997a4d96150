// Package server assembles a carryover server: config -> store (SQLite) -> provisioner (sandbox or
// local) -> session service -> HTTP API on a listener. cmd/carryover, the tests and the benchmark start servers through it; the
// parts themselves live in server/session (the service), server/httpapi (the front door),
// persistence/ and kernel/.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence/sqlite"
	"github.com/carryover/carryover/server/httpapi"
	"github.com/carryover/carryover/server/session"
)

// Server is the running carryover: store, session service and HTTP API on a listener.
type Server struct {
	cfg   *configs.Config
	Store carryover.Store
	Svc   *session.Service
	API   *httpapi.API
	Token string
	prov  kernel.Provisioner
	http  *http.Server
	ln    net.Listener
	log   *slog.Logger
}

// New opens the database under cfg.DataDir, recovers the sessions and prepares the API.
// ui, when non-nil, is served at /.
func New(ctx context.Context, cfg *configs.Config, ui http.Handler, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if err := session.PrepareDirs(cfg); err != nil {
		return nil, err
	}
	prov, err := newProvisioner(cfg, log)
	if err != nil {
		return nil, err
	}
	store, err := sqlite.Open(filepath.Join(cfg.DataDir, "carryover.db"))
	if err != nil {
		closeProvisioner(prov, log)
		return nil, err
	}
	svc, err := session.NewService(ctx, session.Options{Config: cfg, Store: store, Provisioner: prov, Logger: log})
	if err != nil {
		store.Close()
		closeProvisioner(prov, log)
		return nil, err
	}
	token := cfg.Auth.Token
	if token == "" {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		token = hex.EncodeToString(b)
	}
	tokens := map[string]string{token: carryover.DefaultTenant}
	for name, tok := range cfg.Auth.Tenants {
		tokens[tok] = name
	}
	api := httpapi.New(svc, httpapi.Options{Tokens: tokens, MaxBodyBytes: cfg.Server.MaxBodyBytes,
		AllowedOrigins: cfg.Server.AllowedOrigins, UI: ui, Logger: log})
	s := &Server{cfg: cfg, Store: store, Svc: svc, API: api, Token: token, log: log, prov: prov}
	s.http = &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// Listen binds the configured address (":0" style addresses pick a free port).
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Server.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Server.Addr, err)
	}
	s.ln = ln
	return nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the UI address with the token, as Jupyter prints it.
func (s *Server) URL() string { return fmt.Sprintf("http://%s/?token=%s", s.Addr(), s.Token) }

// Serve serves until Shutdown.
func (s *Server) Serve() error {
	s.Svc.StartBackground()
	err := s.http.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, lets in-flight runs finish within the grace period (they checkpoint
// as every run does), then stops every kernel and closes the database.
func (s *Server) Shutdown(ctx context.Context) error {
	grace := configs.Seconds(float64(s.cfg.Server.ShutdownGraceSeconds))
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	s.Svc.BeginShutdown()
	err := s.http.Shutdown(hctx)
	if err != nil {
		// Runs still going past the grace period: interrupt them so they end and checkpoint.
		s.Svc.InterruptAll(ctx)
		s.Svc.WaitIdle(5 * time.Second)
	}
	s.Svc.WaitIdle(grace)
	if cerr := s.Svc.Close(ctx); cerr != nil && err == nil {
		err = cerr
	}
	closeProvisioner(s.prov, s.log) // after every kernel, pooled ones included, is shut down
	if cerr := s.Store.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	return err
}

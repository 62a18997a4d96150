// Package server assembles a carryover server: config -> store (SQLite) -> provisioner (sandbox or
// local) -> session service -> HTTP API and MCP server on a listener. cmd/carryover, the tests and the benchmark start servers through it; the
// parts themselves live in server/session (the service), server/httpapi and server/mcp (the front doors),
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
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/doctor"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/kernel/template"
	"github.com/carryover/carryover/persistence/backup"
	"github.com/carryover/carryover/server/cluster"
	"github.com/carryover/carryover/server/httpapi"
	"github.com/carryover/carryover/server/jupyter"
	"github.com/carryover/carryover/server/mcp"
	"github.com/carryover/carryover/server/session"
	"github.com/prometheus/client_golang/prometheus"
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
	node  *cluster.Node      // nil unless the store is shared (cluster_node.go)
	full  *cluster.Full      // the requests node's router keeps here in a full cluster (cluster_node.go)
	repl  *backup.Replicator // nil unless backup.to is set (backup.go)
	lock  *dataDirLock       // held on data_dir from Assemble to the end of Shutdown
	fatal chan error         // an error after which the server must stop (Fatal)
	ready readiness          // GET /readyz (readiness.go)

	Jupyter *jupyter.Door // the Jupyter front door at /jupyter/
}

// Parts are what a server is made of beside its config. A nil Store or Provisioner is made from the
// config (SQLite under data_dir; the sandbox when sandbox.enabled, else local processes): another
// backend or launcher is dropped in here, without touching the service or the API. The server owns
// the parts it is given and closes them at Shutdown.
type Parts struct {
	Store       carryover.Store
	Provisioner kernel.Provisioner
	UI          http.Handler // served at / when not nil
	Logger      *slog.Logger
	// Templates, when set, are kernel templates this server shares with the other servers of its
	// process whose kernels are alike (kernel/template.Shared: the tests run hundreds of servers in
	// one process). nil: the server starts its own, as `carryover serve` does.
	Templates *template.Shared
}

// New opens the database under cfg.DataDir, recovers the sessions and prepares the API.
// ui, when non-nil, is served at /.
func New(ctx context.Context, cfg *configs.Config, ui http.Handler, log *slog.Logger) (*Server, error) {
	return Assemble(ctx, cfg, Parts{UI: ui, Logger: log})
}

// Assemble builds a server from cfg and p: store -> provisioner -> session service -> API.
func Assemble(ctx context.Context, cfg *configs.Config, p Parts) (*Server, error) {
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	var lock *dataDirLock
	fail := func(err error) (*Server, error) {
		defer lock.release() // last: the parts closed first may still write under data_dir
		if p.Store != nil {
			p.Store.Close()
		}
		if p.Provisioner != nil {
			closeProvisioner(p.Provisioner, log)
		}
		return nil, err
	}
	lock, err := claimDataDir(cfg)
	if err != nil {
		return fail(err)
	}
	if err := p.fill(ctx, cfg, log); err != nil {
		return fail(err)
	}
	// This server's own metrics (its service's, its node ledger's) on its own registry; GET /metrics
	// serves them beside the process's (Go runtime, process, the cluster's placements).
	metrics := prometheus.NewRegistry()
	// A cluster node's router records the requests it keeps here in a full cluster; the service's
	// capacity refusals of their sessions say so (cluster_node.go).
	full := cluster.NewFull()
	svc, err := session.NewService(ctx, session.Options{Config: sessionConfig(cfg), Store: p.Store, Provisioner: p.Provisioner, Logger: log,
		Metrics: metrics, Refusal: full.Refusal})
	if err != nil {
		return fail(err)
	}
	token := cfg.Auth.Token
	if token == "" {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		token = hex.EncodeToString(b)
	}
	api := httpapi.New(svc, httpapi.Options{Tokens: tokens(token, cfg.Auth.Tenants), AdminToken: token, Keys: p.Store,
		RateLimit:    httpapi.RateLimit{PerSecond: cfg.Auth.RateLimit.RequestsPerSecond, Burst: cfg.Auth.RateLimit.Burst},
		MaxBodyBytes: cfg.Server.MaxBodyBytes, MaxImportBytes: cfg.Server.MaxImportBytes, AllowedOrigins: cfg.Server.AllowedOrigins, UI: p.UI, Logger: log,
		Metrics: prometheus.Gatherers{prometheus.DefaultGatherer, metrics}})
	s := &Server{cfg: cfg, Store: p.Store, Svc: svc, API: api, Token: token, log: log, prov: p.Provisioner, lock: lock,
		fatal: make(chan error, 1), full: full}
	if err := s.mountFrontDoors(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

// fill makes the parts p was not given: the configured provisioner and store.
func (p *Parts) fill(ctx context.Context, cfg *configs.Config, log *slog.Logger) error {
	if p.Provisioner == nil {
		prov, err := newProvisioner(cfg, p.Templates, log)
		if err != nil {
			return err
		}
		p.Provisioner = prov
	}
	if p.Store == nil {
		store, err := openStore(ctx, cfg)
		if err != nil {
			return err
		}
		p.Store = store
	}
	return nil
}

// mountFrontDoors builds the front doors on s.Svc and s.API (the MCP server at /mcp and Jupyter's
// at /jupyter/, same tokens and tenants; the API and UI everywhere else), joins the cluster when
// configured, starts the replication, and sets s.http's handler.
func (s *Server) mountFrontDoors(ctx context.Context) error {
	cfg, svc, api, log := s.cfg, s.Svc, s.API, s.log
	// Not a ServeMux: it would clean (redirect) paths before httpapi can refuse their ".." segments.
	var mcpHandler http.Handler // built once the cluster node exists: its tool calls route through it
	apiHandler := api.Handler()
	s.Jupyter = jupyter.New(svc, jupyter.Options{Authenticate: api.AuthenticateRun, StatusOf: httpapi.StatusOf, RestartRestores: cfg.Jupyter.RestartRestores,
		Python: cfg.Kernel.Python, Logger: log})
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mcp.Path {
			mcpHandler.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, jupyter.Path) {
			s.Jupyter.ServeHTTP(w, r)
			return
		}
		apiHandler.ServeHTTP(w, r)
	})
	node, handler, err := joinCluster(ctx, cfg, s.Store, svc, s.full, api.Authenticate, front, log, s.stop)
	if err != nil {
		return err
	}
	// Last of the parts that can fail: a replicator started before a failure would outlive the store.
	// (backup.to is SQLite only, so there is no cluster node to stop here.)
	if s.repl, err = startReplication(ctx, cfg, s.Store, log); err != nil {
		return err
	}
	s.node = node
	mcpOpts := mcp.Options{Authenticate: api.AuthenticateRun, MaxBodyBytes: cfg.Server.MaxBodyBytes, Logger: log}
	if node != nil {
		mcpOpts.Router = node
		api.ShowCluster(node.View)
	}
	api.ShowDisk(func() (httpapi.DiskStatus, error) {
		sp, err := doctor.DataDirSpace(cfg.DataDir, 0)
		return httpapi.DiskStatus{Dir: sp.Dir, FreeBytes: sp.FreeBytes, TotalBytes: sp.TotalBytes, Level: sp.Level, Warning: sp.Warning}, err
	})
	s.ready.since = time.Now()
	api.ShowReadiness(s.readyCheck)
	mcpHandler = mcp.Handler(svc, mcpOpts)
	s.http = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	return nil
}

// tokens maps every API token to its tenant: token to the default one, auth.tenants to theirs.
func tokens(token string, tenants map[string]string) map[string]string {
	m := map[string]string{token: carryover.DefaultTenant}
	for name, tok := range tenants {
		m[tok] = name
	}
	return m
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

// Run serves until ctx is done (the serve command's SIGINT or SIGTERM) or the server must stop
// (Fatal), then shuts down gracefully within grace. It returns Fatal's error in the second case, so
// the process exits non-zero, and Serve's when serving failed.
func (s *Server) Run(ctx context.Context, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.Serve() }()
	var fatal error
	select {
	case err := <-errc:
		return err
	case fatal = <-s.fatal:
		s.log.Error("stopping: this server cannot go on", "err", fatal)
	case <-ctx.Done():
	}
	s.log.Info("shutting down: letting runs finish, then stopping kernels")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		return err
	}
	return fatal
}

// Fatal delivers the error after which this server must stop serving and its process exit non-zero:
// a cluster node refused because the cluster now writes a checkpoint format it cannot read. The serve
// command shuts down then (a supervisor restarts it, as the new build, or sees it fail).
func (s *Server) Fatal() <-chan error { return s.fatal }

// stop hands err to Fatal (the first one only).
func (s *Server) stop(err error) {
	select {
	case s.fatal <- err:
	default:
	}
}

// Shutdown stops accepting, lets in-flight runs finish within the grace period (they checkpoint
// as every run does), then stops every kernel and closes the database.
func (s *Server) Shutdown(ctx context.Context) error {
	grace := configs.Seconds(float64(s.cfg.Server.ShutdownGraceSeconds))
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	s.Svc.BeginShutdown()
	s.ready.draining.Store(true) // GET /readyz: not ready
	s.Jupyter.Shutdown()         // hijacked websockets: http.Shutdown does not close them
	if s.node != nil {
		// While the listener stays open: each session is handed over once idle, and what reaches
		// this node for it from then on goes to its next owner (server/cluster/drain.go).
		s.node.HandOver(hctx)
	}
	err := s.http.Shutdown(hctx)
	if err != nil {
		// Runs still going past the grace period: interrupt them so they end and checkpoint.
		s.Svc.InterruptAll(ctx)
		s.Svc.WaitIdle(5 * time.Second)
	}
	s.Svc.WaitIdle(grace)
	if s.node != nil {
		s.node.EndHandovers() // none beside Close
	}
	if cerr := s.Svc.Close(ctx); cerr != nil && err == nil {
		err = cerr
	}
	closeProvisioner(s.prov, s.log) // after every kernel, pooled ones included, is shut down
	if s.node != nil {
		s.node.Drain(ctx) // release this node's sessions: other nodes claim them without waiting for the TTL
	}
	if s.repl != nil { // a last snapshot, with every turn that ended before the shutdown
		if cerr := s.repl.Close(ctx); cerr != nil {
			s.log.Warn("backup: last snapshot", "err", cerr)
		}
	}
	if cerr := s.Store.Close(); cerr != nil && err == nil {
		err = cerr
	}
	s.lock.release() // nothing of this server writes under data_dir any more
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	return err
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/capacity"
	"github.com/carryover/carryover/server/idempotency"
	"github.com/carryover/carryover/server/quota"
	"github.com/carryover/carryover/server/session/cost"
	"github.com/carryover/carryover/server/session/fidelity"
	"github.com/carryover/carryover/server/session/fifo"
	"github.com/carryover/carryover/server/session/kernels"
	"github.com/carryover/carryover/server/session/metrics"
	"github.com/carryover/carryover/server/session/moves"
	"github.com/carryover/carryover/server/session/nodewatch"
	"github.com/carryover/carryover/server/session/skills"
	"github.com/carryover/carryover/server/session/stream"
	"github.com/prometheus/client_golang/prometheus"
)

// Service is the session service: it owns the sessions, composes kernels (kernel/) with
// checkpoints (persistence/), and is what the HTTP and websocket handlers call.
type Service struct {
	cfg   Config
	store carryover.Store
	ckpt  *persistence.Checkpointer
	kern  *kernels.Factory // the pool, the launch options, a kernel attached to its session
	log   *slog.Logger
	m     *metrics.Metrics

	mu       sync.Mutex
	sessions map[string]*Session
	closing  bool
	runSeq   int64
	bg       background       // restores after a death, rotations, the loop (background.go)
	skills   *skills.Skills   // the tenants' skills and this node's cache of them
	adm      admission        // what a turn and a claim of a kernel pass (capacity.go)
	watch    *nodewatch.Watch // the node's capacity and memory as the status endpoint shows them
	moved    moves.Set        // sessions lately handed to another node: looked up, not_owner (package moves)
}

// admission is the node's admission of turns and kernels, each part a package of its own.
type admission struct {
	quota *quota.Gate       // the tenants' quotas but live_kernels (quota.go)
	idem  *idempotency.Keys // idempotency keys (idempotency.go)
	// ephemeral is the tenants' idempotency keys of POST /api/execute (ephemeral_keyed.go).
	ephemeral *idempotency.Keys
	ledger    *capacity.Ledger // the node's live kernels per tenant, live_kernels included
	// leases maps each live kernel (*kernel.Kernel) to its *capacity.Lease, which stopKernel gives back.
	leases sync.Map
	live   prometheus.Gauge // carryover_kernels_live: the leases held
	// refusal reshapes a refusal of a claim for a session before it is answered (Options.Refusal).
	refusal func(sessionID string, err error) error
}

// background is the service's work in the background.
type background struct {
	wg   sync.WaitGroup     // restores after a death, rotations, the loop
	stop context.CancelFunc // stops the loop; under Service.mu
}

// Session is a session as the server holds it, the handle of one session as jupyter_client's
// KernelManager is of one kernel under its MultiKernelManager (the Service: the registry,
// lifecycle, recovery, cluster adoption): its document, its kernel, its run lock and its stream.
// Front doors get it from Service.Session and call its turns (Run, RunCommand, RunRaw,
// SendInLine), its kernel's controls (Interrupt, Restart, Rotate, Hibernate), its stream (Attach,
// SubscribeEvents) and its checkpoints; the steps of its turns (ensureKernel, checkpoint,
// hibernateLocked, ...) are its unexported methods.
type Session struct {
	svc         *Service // what every session shares: the store, the checkpoint engine, the node
	id          string
	lock        fifo.Lock // one execution at a time, in arrival order
	hub         stream.Hub
	workspaceMu sync.Mutex // makes the workspace dir (ensureWorkspace)

	mu      sync.Mutex // guards the fields below
	doc     carryover.Session
	kern    *kernel.Kernel
	running *activeRun    // the run in flight, for websocket clients that connect mid-run
	setup   *pendingSetup // the kernel's set-up, to ride on its first cell (kernels.go)

	kernStart   time.Time     // when the current kernel was attached (rotation clock)
	pausedAt    time.Time     // when the session was paused (zero when not paused)
	pausedFor   time.Duration // paused time during the current kernel's life
	rotating    bool          // a timed rotation is queued or running
	lastSkipped string        // what the last checkpoint skipped (variables_skipped is sent on change)
	deleted     bool          // DELETE happened: nothing may start a kernel for it any more
	cost        cost.Meter    // CPU and memory use of the current kernel, for cost_cap_cents
	evicted     bool          // another node owns it now (cluster.go): nothing here is saved any more
	saved       savedMark     // the last checkpoint and the kernel input it covers (saved.go)
	// notes is what the next answer tells of what was not carried over: the processes a kernel
	// took with it, the last restore's report (package fidelity).
	notes fidelity.Notes
}

// Options configures a Service.
type Options struct {
	Config      Config
	Store       carryover.Store
	Provisioner kernel.Provisioner // runs kernels and exec commands; nil: local processes
	Logger      *slog.Logger
	// Spec is the kernelspec kernels start from; nil: the "python" kernelspec found on this machine,
	// pointed at Config.Python (a unit test passes one and needs no Python at all).
	Spec *kernel.Spec
	// Memory reads the host's memory for the pressure watch; nil: ProcMemory. A test passes its own
	// to simulate pressure.
	Memory MemorySource
	// Metrics is where the service's metrics are registered (the assembly passes its registry);
	// nil: nowhere (a unit test's).
	Metrics prometheus.Registerer
	// Refusal, when set, reshapes a refusal of a claim of a kernel for a session before it is
	// answered: a cluster node's (cluster.Full.Refusal) says the cluster is full when the router
	// kept the session's request here because no node had room. Nil: the node's own refusal.
	Refusal func(sessionID string, err error) error
}

// NewService loads every session from the store and starts the warm pool.
func NewService(ctx context.Context, o Options) (*Service, error) {
	cfg := o.Config
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	spec, err := kernels.OwnSpec(o.Spec, cfg.Python)
	if err != nil {
		return nil, err
	}
	if err := makeDirs(cfg); err != nil {
		return nil, err
	}
	memory := o.Memory
	if memory == nil {
		memory = ProcMemory
	}
	room := int64(-1)
	if h, err := memory(); err == nil {
		room = h.AvailableBytes
	}
	files := capacity.OpenFileLimit()
	budget := capacity.ResolveBudget(capacity.BudgetConfig{MaxLiveKernels: cfg.MaxLiveKernels, MemoryBudget: cfg.MemoryBudget,
		MemoryReserve: cfg.MemoryReserve, KernelBytes: cfg.KernelBytes, Forked: cfg.ForkedKernels, OpenFiles: files,
		PoolSize: cfg.PoolSize, PoolMaxSize: cfg.PoolMaxSize}, room)
	log.Info("node capacity", "max_live_kernels", budget.MaxLive, "from", budget.Source, "memory_budget_bytes", budget.Memory,
		"kernel_bytes", budget.KernelBytes, "open_files", files, "queue_seconds", cfg.QueueWait.Seconds())
	m := metrics.New(o.Metrics)
	s := &Service{
		m: m,
		adm: admission{
			ledger:    capacity.New(capacity.Config{Max: budget.MaxLive, Wait: cfg.QueueWait, QueueMax: cfg.QueueMax, Metrics: o.Metrics}),
			idem:      idempotency.New(o.Store, cfg.IdempotencyTTL, log),
			ephemeral: idempotency.New(idempotency.TenantStore(o.Store), cfg.IdempotencyTTL, log),
			live:      m.KernelsLive,
			refusal:   o.Refusal,
		},
		watch:    nodewatch.New(budget, memory, m.Hibernations, m.KernelMemory),
		cfg:      cfg,
		store:    o.Store,
		ckpt:     newCheckpointer(cfg, o.Store),
		log:      log,
		sessions: map[string]*Session{},
		skills:   skills.New(o.Store, cfg.DataDir, log),
	}
	if s.adm.refusal == nil {
		s.adm.refusal = func(_ string, err error) error { return err }
	}
	s.adm.quota = quota.New(cfg.Quotas, quotaUsage{s})
	s.kern = kernels.New(cfg.kernelsConfig(), kernels.Deps{Ckpt: s.ckpt, Skills: s.skills, Log: log, OnLimit: s.sandboxEvent,
		Options: kernel.Options{
			Spec:              spec,
			Transport:         cfg.Transport,
			WorkDir:           cfg.workspacesDir(),
			StartupTimeout:    cfg.StartupTimeout,
			HeartbeatInterval: cfg.HeartbeatInterval,
			ShutdownGrace:     cfg.ShutdownGrace,
			Env:               map[string]string{"MPLBACKEND": "module://matplotlib_inline.backend_inline"},
			Logger:            log,
		}})
	if err := s.skills.ImportLegacy(ctx); err != nil {
		return nil, err
	}
	if err := s.recover(ctx); err != nil {
		return nil, err
	}
	s.kern.Start(o.Provisioner, kernel.PoolConfig{Size: cfg.PoolSize, MaxSize: cfg.PoolMaxSize,
		Parallel: cfg.PoolParallel, ShrinkAfter: cfg.PoolShrinkAfter})
	return s, nil
}

// newCheckpointer is the checkpoint engine the service's configuration asks for.
func newCheckpointer(cfg Config, store carryover.Store) *persistence.Checkpointer {
	return &persistence.Checkpointer{
		Store:     store,
		ChunkSize: cfg.ChunkSize,
		Retention: cfg.Retention,
		SpoolRoot: cfg.Spool(), // kernels name their spool dir; only these are believed
		PreImport: cfg.PreImport,
		Replay:    cfg.Replay,
		Lazy:      cfg.LazyRestore,
		Shared:    sharedBuffers(cfg.SharedBuffers),
		Python:    cfg.Python,
		Files: persistence.FileLimits{
			SaveHidden:    cfg.SaveHiddenFiles,
			MaxFileBytes:  cfg.MaxFileBytes,
			MaxTotalBytes: cfg.MaxWorkspaceBytes,
			ChunkSize:     cfg.ChunkSize,
			Sync:          cfg.SyncFiles,
		},
	}
}

// workspace is the host directory that is a session's /workspace.
func (c Config) workspace(id string) string { return kernels.Workspace(c.DataDir, id) }

// recover loads every session from SQLite after a (re)start. No kernel is running for any of them:
// each gets a new kernel and its last checkpoint lazily, on its next run.
func (s *Service) recover(ctx context.Context) error {
	rows, err := s.store.ListSessions(ctx)
	if err != nil {
		return fmt.Errorf("server: loading sessions: %w", err)
	}
	for _, r := range rows {
		var doc carryover.Session
		if err := json.Unmarshal(r.Doc, &doc); err != nil {
			s.log.Error("session document unreadable; skipped", "session", r.ID, "err", err)
			continue
		}
		s.sessions[r.ID] = &Session{svc: s, id: r.ID, doc: doc.Recovered()}
	}
	if len(rows) > 0 {
		s.log.Info("sessions recovered", "count", len(rows))
	}
	return nil
}

// Session returns the handle of session id (its turns, its kernel, its stream), or a not_found error.
// A handle outlives a Delete of its session: its turns are refused then (not_found), as a turn
// that waited for the run lock while the Delete came is.
func (s *Service) Session(id string) (*Session, error) {
	s.mu.Lock()
	ls, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok {
		return nil, s.moved.NotHere(s.store, id)
	}
	return ls, nil
}

// docCopy returns a copy of the session document (a value: the caller may read it without ls.mu).
func (ls *Session) docCopy() carryover.Session {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.doc
}

// save persists the session document (the caller holds ls.mu).
func (ls *Session) saveLocked(ctx context.Context) error {
	s := ls.svc
	ls.doc.UpdatedAt = time.Now().UTC()
	b, err := json.Marshal(ls.doc)
	if err != nil {
		return err
	}
	return s.store.UpdateSession(ctx, carryover.SessionRecord{
		ID: ls.id, ClientID: ls.doc.ClientID, State: ls.doc.State, Doc: b,
		CreatedAt: ls.doc.CreatedAt, UpdatedAt: ls.doc.UpdatedAt,
	})
}

// errUnchanged, returned by an update's fn, means "nothing to save": the document is kept as is.
var errUnchanged = errors.New("unchanged")

// update applies fn to the session document under its lock and persists it.
func (ls *Session) update(ctx context.Context, fn func(*carryover.Session) error) (carryover.Session, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	before := ls.doc
	if err := fn(&ls.doc); err != nil {
		ls.doc = before
		if errors.Is(err, errUnchanged) {
			return before, nil
		}
		return before, err
	}
	if err := ls.saveLocked(ctx); err != nil {
		ls.doc = before
		return before, fmt.Errorf("saving session: %w", err)
	}
	return ls.doc, nil
}

// setSandboxStatus saves the session's sandbox status.
func (ls *Session) setSandboxStatus(ctx context.Context, status string) error {
	_, err := ls.update(ctx, func(d *carryover.Session) error { d.Sandbox.Status = status; return nil })
	return err
}

// logSaveErr reports a session write that failed where nobody waits for an answer (a kernel's
// death, a background status change): logged and counted, never silent.
func (ls *Session) logSaveErr(what string, err error) {
	s := ls.svc
	if err != nil {
		s.log.Error("session not saved", "session", ls.id, "what", what, "err", err)
		s.m.RecordFailures.Inc()
	}
}

// emit appends an event to the session's log and pushes it to subscribed websockets, in order.
func (ls *Session) emit(ctx context.Context, typ string, payload any) {
	s := ls.svc
	if payload == nil {
		payload = map[string]any{}
	}
	add := func() (carryover.Event, error) {
		return s.store.AppendEvent(context.WithoutCancel(ctx), ls.id, typ, payload)
	}
	if _, err := ls.hub.LogEvent(add); err != nil {
		s.log.Error("event not recorded", "session", ls.id, "type", typ, "err", err)
	}
}

// List returns every session, oldest first.
func (s *Service) List() []carryover.Session {
	s.mu.Lock()
	out := make([]carryover.Session, 0, len(s.sessions))
	for _, ls := range s.sessions {
		out = append(out, ls.docCopy())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b carryover.Session) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// Get returns one session.
func (s *Service) Get(id string) (carryover.Session, error) {
	ls, err := s.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	return ls.docCopy(), nil
}

// Close stops the pool and every session's kernel. In-flight runs should have been let finish first.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	if s.bg.stop != nil {
		s.bg.stop()
	}
	all := slices.Collect(maps.Values(s.sessions))
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, ls := range all {
		if k := ls.currentKernel(); k != nil {
			ls.sampleCost(context.WithoutCancel(ctx), k) // its use since the last sample is the session's
		}
		ls.mu.Lock()
		k := ls.kern
		ls.kern = nil
		if k != nil && ls.doc.Sandbox.Status == carryover.SandboxLive {
			ls.doc.Sandbox.Status = carryover.SandboxHibernated
			ls.logSaveErr("hibernated at close", ls.saveLocked(ctx))
		}
		ls.mu.Unlock()
		if k != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.stopKernel(ctx, k)
			}()
		}
	}
	wg.Wait()
	s.bg.wg.Wait()
	err := s.kern.Close(ctx)
	// Every kernel is gone, pooled ones included: so is every use of the spool.
	if s.cfg.SpoolDir == "" {
		_ = os.RemoveAll(s.cfg.Spool())
	} else if entries, rerr := os.ReadDir(s.cfg.SpoolDir); rerr == nil {
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(s.cfg.SpoolDir, e.Name()))
		}
	}
	return err
}

// stopKernel shuts a kernel down; its provisioner releases what it held (spool dir, sandbox).
func (s *Service) stopKernel(ctx context.Context, k *kernel.Kernel) {
	if err := k.Shutdown(context.WithoutCancel(ctx)); err != nil {
		s.log.Warn("kernel shutdown", "kernel", k.ID(), "err", err)
	}
	s.adm.releaseLease(k) // after the process is gone: a lease is a kernel alive
}

// isDied reports whether err says the kernel died.
func isDied(err error) bool { return errors.Is(err, kernel.ErrDied) }

// beginShutdown refuses new sessions.
func (s *Service) BeginShutdown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}

// interruptAll interrupts every kernel that is running something.
func (s *Service) InterruptAll(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ls := range s.sessions {
		if ls.lock.Busy() {
			_ = ls.Interrupt(ctx)
		}
	}
}

// waitIdle waits until no session holds its run lock, or d passes.
func (s *Service) WaitIdle(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		busy := false
		s.mu.Lock()
		for _, ls := range s.sessions {
			if ls.lock.Busy() {
				busy = true
				break
			}
		}
		s.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

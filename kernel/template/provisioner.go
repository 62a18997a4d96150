package template

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover/kernel"
)

//go:embed template.py
var script []byte

//go:embed box.py
var boxScript []byte

// closeGrace is how long Close waits for a template to exit after its stdin closed.
const closeGrace = 5 * time.Second

var timeAfter = time.After

// warmWait bounds how long a launch waits for a template that is still warming up (or that hangs
// in an import) before it starts its kernel cold instead.
const warmWait = 15 * time.Second

// Config says which template to keep and what to fall back on.
type Config struct {
	Python    string   // the interpreter of the kernels it makes (the kernelspec's argv[0])
	PreImport []string // persistence.pre_import: imported once, in the template
	// Preload is Python the template runs once while it warms, after the snapshot agent's
	// dependencies and before PreImport (persistence.AgentPreload: the agent's modules, compiled
	// once, not in every kernel). A function carryover_warm it defines is called after PreImport,
	// before the freeze: work over the imported modules that every child then shares (the agent's
	// index of their objects). A failure is logged in the template's log; kernels still start.
	Preload string
	// Local runs what the template does not: exec commands, kernels of another argv or env, and
	// kernels while no template is ready. Its SpoolRoot gives forked kernels their spool dirs too.
	Local *kernel.LocalProvisioner
	Dir   string // where the template's script and log live ("": a new temp dir, removed by Close)
	// Env, when set, is the template's environment at import instead of a local kernel's: a
	// sandbox's kernel environment, for a template whose kernels are forked into boxes (ForkBoxed).
	Env map[string]string
	// ImportEnv, when set, replaces the server's kernels' values of the variables libraries read at
	// import (templateEnv, e.g. MPLBACKEND) in the template's env: a launch is forkable when its env
	// sets those as this does (the persistence tests' kernels run matplotlib's Agg backend).
	ImportEnv map[string]string
	Logger    *slog.Logger
}

// Stats are the provisioner's figures.
type Stats struct {
	PID      int   // the template's process (0: none ready)
	Forks    int64 // kernels forked from a template
	Cold     int64 // kernels started from scratch (not forkable, or no template ready)
	Restarts int64 // templates started again after one exited
}

// Provisioner forks kernels from a warm template (see the package doc); safe for concurrent use.
// Its template is its own (New), or one it shares with the other Provisioners of a Shared whose
// kernels it would make alike (Shared.New).
type Provisioner struct {
	cfg     Config
	sup     *supervisor
	release func() error // gives the template back (Close)
	forks   atomic.Int64
	cold    atomic.Int64
	closed  atomic.Bool
}

// New starts the template in the background; kernels launched before it is warm wait for it.
func New(cfg Config) (*Provisioner, error) {
	cfg = cfg.withDefaults()
	sup, err := startSupervisor(cfg)
	if err != nil {
		return nil, err
	}
	return &Provisioner{cfg: cfg, sup: sup, release: sup.close}, nil
}

// withDefaults fills what New needs and the caller left out.
func (c Config) withDefaults() Config {
	if c.Local == nil {
		c.Local = &kernel.LocalProvisioner{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Launch forks the kernel from the template when its argv is the template's kernel, it is not asked
// Fresh, and its env sets nothing the pre-imported libraries read at import; else, or when no template is ready, it starts
// the kernel cold through the local provisioner.
func (tp *Provisioner) Launch(ctx context.Context, spec kernel.LaunchSpec) (kernel.KernelProcess, error) {
	args, ok := tp.forkable(spec)
	if !ok {
		tp.cold.Add(1)
		return tp.cfg.Local.Launch(ctx, spec)
	}
	c, err := tp.forkKernel(ctx, spec, args)
	if err == nil {
		tp.forks.Add(1)
		return c, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	tp.sup.log.Warn("kernel template could not fork a kernel; starting it cold", "err", err)
	tp.cold.Add(1)
	return tp.cfg.Local.Launch(ctx, spec)
}

// forkKernel asks the warm template for the kernel.
func (tp *Provisioner) forkKernel(ctx context.Context, spec kernel.LaunchSpec, args []string) (*child, error) {
	wctx, cancel := context.WithTimeout(ctx, warmWait)
	p, err := tp.sup.ready(wctx)
	cancel()
	if err != nil {
		return nil, err
	}
	var spool string
	if tp.cfg.Local.SpoolRoot != "" {
		spool = filepath.Join(tp.cfg.Local.SpoolRoot, filepath.Base(spec.RuntimeDir))
	}
	return p.fork(ctx, forkSpec{Args: args, Env: childEnv(spec.Env), Dir: spec.Dir, Log: spec.LogPath,
		OOMScoreAdj: kernel.KernelOOMScoreAdj}, spool)
}

// Box is the sandbox a kernel is forked into (kernel/sandbox describes it; box.py enters it).
type Box struct {
	Holder  int      `json:"holder"`  // host pid of the box's first process, which sleeps
	Start   uint64   `json:"start"`   // its start time (/proc/PID/stat field 22), against pid reuse
	Cgroups []string `json:"cgroups"` // the cgroup.procs files of the box's groups
	Seccomp string   `json:"seccomp"` // the filter program's file ("": none)
	UID     int      `json:"uid"`     // the box's uid (0: no uid of its own, capabilities dropped)
	// OOMScoreAdj is the kernel's oom_score_adj, which the waiting child of a box entered ahead
	// sets while it is one thread (EnterBox; 0: not set there).
	OOMScoreAdj int `json:"oom_score_adj,omitempty"`
	// Entered, when set, is this box as EnterBox entered it ahead: the kernel is forked there.
	Entered *Entered `json:"-"`
}

// Entered is a box a template's children entered ahead (EnterBox), waiting for its kernel.
type Entered struct {
	p   *proc // the template that entered it (another one knows nothing of it)
	id  int   // its enter request
	pid int   // its first child (host pid; it exits once the kernel is forked, or its box dies)
}

// PID is the entered box's first child, outside the box's pid namespace.
func (e *Entered) PID() int { return e.pid }

// EnterBox does ahead what a boxed fork into box does before it knows the kernel (template.py's
// enter request: join the box's cgroups, rlimits and namespaces, fork there), for a box that waits
// as a spare; ForkBoxed with the answer in box.Entered then only forks the kernel. Failing to enter
// is told by that ForkBoxed. The entered children die with their box, and exit once their
// template is gone.
func (tp *Provisioner) EnterBox(ctx context.Context, box Box) (*Entered, error) {
	wctx, cancel := context.WithTimeout(ctx, warmWait)
	p, err := tp.sup.ready(wctx)
	cancel()
	if err != nil {
		return nil, err
	}
	box.Entered = nil
	// Set now rather than by the launch's kernel.RaiseOOMScore once the kernel is ready: a write to a
	// process with threads walks every process on the host (~1 ms here, on the launch's path); the
	// launch's call then finds it set and writes nothing. (A kernel forked without a box entered
	// ahead sets it itself: forkSpec.OOMScoreAdj.)
	box.OOMScoreAdj = kernel.KernelOOMScoreAdj
	id, pid, err := p.enter(ctx, box)
	if err != nil {
		return nil, err
	}
	return &Entered{p: p, id: id, pid: pid}, nil
}

// ErrNotForkable is a launch the template cannot make (another argv, an env read at import, Fresh).
var ErrNotForkable = errors.New("kernel template: this kernel is not forkable")

// Forkable tells whether spec's kernel can be forked from the template (ForkBoxed, Launch).
func (tp *Provisioner) Forkable(spec kernel.LaunchSpec) bool {
	_, ok := tp.forkable(spec)
	return ok
}

// ForkBoxed forks the kernel spec asks for inside box, with exactly env as its environment and
// /workspace as its cwd. It answers the kernel's host pid and a channel closed once it exited. The
// kernel is not the template's child nor the server's: the box's init reaps it.
func (tp *Provisioner) ForkBoxed(ctx context.Context, spec kernel.LaunchSpec, env map[string]string, box Box) (int, <-chan struct{}, error) {
	args, ok := tp.forkable(spec)
	if !ok {
		return 0, nil, ErrNotForkable
	}
	wctx, cancel := context.WithTimeout(ctx, warmWait)
	p, err := tp.sup.ready(wctx)
	cancel()
	if err != nil {
		return 0, nil, err
	}
	entered := 0
	if box.Entered != nil && box.Entered.p == p { // else its template is gone, and so are its children
		entered = box.Entered.id
	}
	fs := forkSpec{Args: args, Env: env, Dir: "/workspace", Log: spec.LogPath, Box: &box, OOMScoreAdj: kernel.KernelOOMScoreAdj}
	c, err := p.forkIn(ctx, fs, "", entered)
	if errors.Is(err, errUnused) { // its entered children are gone (killed with ...): fork as usual
		tp.sup.log.Warn("kernel template: the box entered ahead was lost; forking into it anew", "err", err)
		c, err = p.forkIn(ctx, fs, "", 0)
	}
	if err != nil {
		return 0, nil, err
	}
	tp.forks.Add(1)
	return c.pid, c.exited, nil
}

// forkable says whether spec is the template's kernel, and answers the kernel app's arguments.
func (tp *Provisioner) forkable(spec kernel.LaunchSpec) ([]string, bool) {
	a := spec.Argv
	if len(a) < 3 || a[0] != tp.cfg.Python || a[1] != "-m" || a[2] != "ipykernel_launcher" {
		return nil, false
	}
	if spec.Fresh || differsAtImport(spec.Env, tp.cfg.importEnv()) {
		return nil, false
	}
	return a[3:], true
}

// childEnv is a forked kernel's environment: a local kernel's (kernel.LocalKernelEnv), except that
// JPY_PARENT_PID is 1. The server's pid there would start ipykernel's parent poller, which exits
// the kernel once its parent is pid 1: a child whose template died (and was reparented) would die
// with it. A child watches the server itself (template.py); pid 1 turns the poller off, and tells
// ipykernel that a parent exists (no console banner in the log).
func childEnv(env map[string]string) map[string]string {
	out := map[string]string{}
	for _, kv := range kernel.LocalKernelEnv(env) {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	out["JPY_PARENT_PID"] = "1"
	return out
}

// Command runs a session's shell command through the local provisioner.
func (tp *Provisioner) Command(ctx context.Context, spec kernel.CommandSpec) (kernel.Process, error) {
	return tp.cfg.Local.Command(ctx, spec)
}

// Stats are the figures now: this Provisioner's forks and cold starts, its template's restarts.
func (tp *Provisioner) Stats() Stats {
	return Stats{Forks: tp.forks.Load(), Cold: tp.cold.Load(), Restarts: tp.sup.restarts.Load(), PID: tp.sup.pid()}
}

// TemplateStats are the figures /api/status shows (kernel.TemplateReporter): the template's memory at
// rest is read now.
func (tp *Provisioner) TemplateStats() (kernel.TemplateStats, bool) {
	st := tp.Stats()
	ts := kernel.TemplateStats{Forks: st.Forks, ColdFallbacks: st.Cold, Restarts: st.Restarts}
	if st.PID != 0 {
		if m, ok := tp.sup.memory(st.PID); ok {
			ts.Live, ts.RSSBytes, ts.PSSBytes, ts.USSBytes = 1, m.rss, m.pss, m.uss
		}
	}
	return ts, true
}

// Close gives the template back: a template of its own stops (a shared one when its last
// Provisioner closes). The kernels it forked stay, but their exits are no longer seen: the server
// shuts every kernel down before it closes its provisioner.
func (tp *Provisioner) Close() error {
	if tp.closed.Swap(true) {
		return nil
	}
	return tp.release()
}

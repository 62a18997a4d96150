package template

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	// once, not in every kernel). A failure is logged in the template's log; kernels still start.
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
type Provisioner struct {
	cfg      Config
	dir      string
	ownDir   bool
	watch    exitWatch
	log      *slog.Logger
	forks    atomic.Int64
	cold     atomic.Int64
	restarts atomic.Int64

	mu      sync.Mutex
	cur     *proc         // the template now (nil while none runs)
	changed chan struct{} // closed when cur changes
	closed  bool
	stop    chan struct{}
	done    chan struct{}

	memMu sync.Mutex
	mem   memReading // the template's memory, last read (TemplateStats)
}

// memReading is a template's memory at a moment: smaps_rollup walks its page tables (~10 ms), so a
// status polled often reads it at most every memEvery.
type memReading struct {
	pid           int
	at            time.Time
	rss, pss, uss int64
}

const memEvery = 5 * time.Second

// New starts the template in the background; kernels launched before it is warm wait for it.
func New(cfg Config) (*Provisioner, error) {
	if cfg.Local == nil {
		cfg.Local = &kernel.LocalProvisioner{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tp := &Provisioner{cfg: cfg, dir: cfg.Dir, log: cfg.Logger.With("component", "kernel-template"),
		changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if tp.dir == "" {
		d, err := os.MkdirTemp("", "carryover-template-")
		if err != nil {
			return nil, fmt.Errorf("kernel template: %w", err)
		}
		tp.dir, tp.ownDir = d, true
	}
	for name, b := range map[string][]byte{"carryover_template.py": script, "carryover_box.py": boxScript,
		"carryover_preload.py": []byte(cfg.Preload)} {
		if err := os.WriteFile(filepath.Join(tp.dir, name), b, 0o600); err != nil {
			return nil, fmt.Errorf("kernel template: %w", err)
		}
	}
	// Spec files of requests a killed server left (a child that never read its own).
	old, _ := filepath.Glob(filepath.Join(tp.dir, "req-*.json"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	p, err := tp.startOne() // here, not in supervise: a launch right after New finds it starting
	if err == nil {
		tp.cur = p
	}
	go tp.supervise(p, err)
	return tp, nil
}

// supervise keeps one template running: started again when it exits (kill -9 included), after a
// pause that doubles while templates keep dying young.
func (tp *Provisioner) supervise(p *proc, err error) {
	defer close(tp.done)
	pause := time.Duration(0)
	for first := true; ; first = false {
		began := time.Now()
		if !first {
			tp.restarts.Add(1)
			p, err = tp.startOne()
		}
		if err == nil {
			tp.setCur(p)
			select {
			case <-p.dead:
				err = p.err
			case <-tp.stop:
				p.close()
				return
			}
		}
		tp.setCur(nil)
		pause = nextPause(pause, time.Since(began))
		tp.log.Warn("kernel template exited; starting another", "err", err, "in", pause)
		select {
		case <-tp.stop:
			return
		case <-time.After(pause):
		}
	}
}

// nextPause is the wait before the next template: none after one that lived a minute, else
// doubling from 100 ms up to a minute.
func nextPause(prev, lived time.Duration) time.Duration {
	if lived > time.Minute {
		return 0
	}
	return min(max(2*prev, 100*time.Millisecond), time.Minute)
}

func (tp *Provisioner) setCur(p *proc) {
	tp.mu.Lock()
	tp.cur = p
	close(tp.changed)
	tp.changed = make(chan struct{})
	tp.mu.Unlock()
}

// startOne starts a template process (not yet warm).
func (tp *Provisioner) startOne() (*proc, error) {
	cfg, err := json.Marshal(map[string]any{"pre_import": tp.cfg.PreImport, "server_pid": os.Getpid(),
		"preload": filepath.Join(tp.dir, "carryover_preload.py")})
	if err != nil {
		return nil, err
	}
	// The last argument is room: a child writes its kernel argv over the template's (template.py's
	// _retitle), and connection file paths are long.
	argv := []string{tp.cfg.Python, filepath.Join(tp.dir, "carryover_template.py"), string(cfg), strings.Repeat(" ", 512)}
	env := make([]string, 0, 8)
	base := childEnv(tp.importEnv()) // ipykernel reads JPY_PARENT_PID when imported: the template's is the children's
	if tp.cfg.Env != nil {
		base = tp.boxedEnv()
	}
	for k, v := range base {
		env = append(env, k+"="+v)
	}
	return startProc(argv, env, tp.dir, filepath.Join(tp.dir, "template.log"), &tp.watch)
}

// boxedEnv is the environment of a template whose kernels are forked into boxes: theirs, except
// what would make it, root on the host, read or write where others can: no PYTHONPATH (box.py puts
// the boxes' entries on the kernel's sys.path after the fork), and HOME, matplotlib's and IPython's
// dirs in its own dir rather than the host's /tmp.
func (tp *Provisioner) boxedEnv() map[string]string {
	env := map[string]string{"JPY_PARENT_PID": "1"}
	for k, v := range tp.cfg.Env {
		env[k] = v
	}
	for k, v := range tp.importEnv() {
		env[k] = v
	}
	delete(env, "PYTHONPATH")
	env["HOME"] = tp.dir
	env["MPLCONFIGDIR"] = filepath.Join(tp.dir, "matplotlib")
	env["IPYTHONDIR"] = filepath.Join(tp.dir, "ipython")
	return env
}

// ready is the warm template, waiting while one starts. An error means none is ready to fork
// (closed, or the one starting died): the launch starts its kernel cold.
func (tp *Provisioner) ready(ctx context.Context) (*proc, error) {
	for {
		tp.mu.Lock()
		p, changed, closed := tp.cur, tp.changed, tp.closed
		tp.mu.Unlock()
		if closed {
			return nil, errors.New("kernel template: closed")
		}
		if p == nil {
			return nil, errors.New("kernel template: none running (restarting)")
		}
		select {
		case <-p.ready:
			select {
			case <-p.dead:
				return nil, fmt.Errorf("%w: %v", errDead, p.err)
			default:
				return p, nil
			}
		case <-p.dead:
			return nil, fmt.Errorf("%w before it was warm: %v (its log: %s)", errDead, p.err, filepath.Join(tp.dir, "template.log"))
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
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
	tp.log.Warn("kernel template could not fork a kernel; starting it cold", "err", err)
	tp.cold.Add(1)
	return tp.cfg.Local.Launch(ctx, spec)
}

// forkKernel asks the warm template for the kernel.
func (tp *Provisioner) forkKernel(ctx context.Context, spec kernel.LaunchSpec, args []string) (*child, error) {
	wctx, cancel := context.WithTimeout(ctx, warmWait)
	p, err := tp.ready(wctx)
	cancel()
	if err != nil {
		return nil, err
	}
	var spool string
	if tp.cfg.Local.SpoolRoot != "" {
		spool = filepath.Join(tp.cfg.Local.SpoolRoot, filepath.Base(spec.RuntimeDir))
	}
	return p.fork(ctx, forkSpec{Args: args, Env: childEnv(spec.Env), Dir: spec.Dir, Log: spec.LogPath}, spool)
}

// Box is the sandbox a kernel is forked into (kernel/sandbox describes it; box.py enters it).
type Box struct {
	Holder  int      `json:"holder"`  // host pid of the box's first process, which sleeps
	Start   uint64   `json:"start"`   // its start time (/proc/PID/stat field 22), against pid reuse
	Cgroups []string `json:"cgroups"` // the cgroup.procs files of the box's groups
	Seccomp string   `json:"seccomp"` // the filter program's file ("": none)
	UID     int      `json:"uid"`     // the box's uid (0: no uid of its own, capabilities dropped)
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
	p, err := tp.ready(wctx)
	cancel()
	if err != nil {
		return 0, nil, err
	}
	c, err := p.fork(ctx, forkSpec{Args: args, Env: env, Dir: "/workspace", Log: spec.LogPath, Box: &box}, "")
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
	if spec.Fresh || differsAtImport(spec.Env, tp.importEnv()) {
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

// Stats are the figures now.
func (tp *Provisioner) Stats() Stats {
	st := Stats{Forks: tp.forks.Load(), Cold: tp.cold.Load(), Restarts: tp.restarts.Load()}
	tp.mu.Lock()
	p := tp.cur
	tp.mu.Unlock()
	if p != nil {
		select {
		case <-p.ready:
			st.PID = p.cmd.Process.Pid
		default:
		}
	}
	return st
}

// TemplateStats are the figures /api/status shows (kernel.TemplateReporter): the template's memory at
// rest is read now.
func (tp *Provisioner) TemplateStats() (kernel.TemplateStats, bool) {
	st := tp.Stats()
	ts := kernel.TemplateStats{Forks: st.Forks, ColdFallbacks: st.Cold, Restarts: st.Restarts}
	if st.PID != 0 {
		if m, ok := tp.memory(st.PID); ok {
			ts.Live, ts.RSSBytes, ts.PSSBytes, ts.USSBytes = 1, m.rss, m.pss, m.uss
		}
	}
	return ts, true
}

// memory is template pid's memory, read again when the last reading is of another pid or older
// than memEvery.
func (tp *Provisioner) memory(pid int) (memReading, bool) {
	tp.memMu.Lock()
	defer tp.memMu.Unlock()
	if tp.mem.pid == pid && time.Since(tp.mem.at) < memEvery {
		return tp.mem, true
	}
	rss, pss, uss, err := kernel.ProcMemory(pid)
	if err != nil {
		return memReading{}, false
	}
	tp.mem = memReading{pid: pid, at: time.Now(), rss: rss, pss: pss, uss: uss}
	return tp.mem, true
}

// Close stops the template. The kernels it forked stay, but their exits are no longer seen: the
// server shuts every kernel down before it closes its provisioner.
func (tp *Provisioner) Close() error {
	tp.mu.Lock()
	if tp.closed {
		tp.mu.Unlock()
		return nil
	}
	tp.closed = true
	tp.mu.Unlock()
	close(tp.stop)
	<-tp.done
	tp.watch.close()
	if tp.ownDir {
		return os.RemoveAll(tp.dir)
	}
	return nil
}

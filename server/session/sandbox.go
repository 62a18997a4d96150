package session

// sandbox.go connects the session service to kernel/sandbox. Every kernel runs in a box of its own
// (keyed by the kernel's runtime dir, which is all kernel.Options.Wrap is told); the box is made when
// the kernel starts, usually long before a session claims it from the warm pool. Claiming it
// (prepareKernel -> attachSandbox) mounts the session's workspace onto the box's /workspace mount
// point, where it propagates into the running sandbox, and applies the session's limits. A shell
// exec gets a box of its own for the command's lifetime. The README's "Sandbox and threat model"
// says what this isolates and what it does not.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/kernel/sandbox"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// sandboxes is the server's side of the sandbox; nil on Service when sandboxing is off or impossible.
type sandboxes struct {
	mgr      *sandbox.Manager
	defaults sandbox.Limits
	maxCPUs  float64
	maxMem   int64
	spoolDir string
	env      map[string]string // the kernel environment besides PATH (cleared otherwise)
	log      *slog.Logger
	seq      atomic.Int64

	mu    sync.Mutex
	kerns map[string]*kernelBox // by kernel runtime dir
}

// kernelBox is the box of one kernel.
type kernelBox struct {
	box   *sandbox.Box
	spool string // host side of the checkpoint spool, idmapped at sandbox.MountTarget("spool")

	mu      sync.Mutex
	session string // whose workspace is attached
}

// initSandbox sets up the sandbox when sandbox.enabled, and points the kernel options at it. Where it
// cannot run, it says so loudly and kernels run as plain processes. Bad limit values are an error.
func (s *Service) initSandbox() error {
	c := s.cfg.Sandbox
	if !c.Enabled {
		s.log.Warn("sandbox disabled (sandbox.enabled=false): kernels and exec commands run as plain processes with the server's privileges")
		return nil
	}
	x := &sandboxes{spoolDir: spoolDir(s.cfg), log: s.log, kerns: map[string]*kernelBox{}}
	var err error
	parseErr := func(key string, e error) {
		if e != nil && err == nil {
			err = fmt.Errorf("server: sandbox.%s: %w", key, e)
		}
	}
	var e error
	x.defaults.CPUs, e = sandbox.ParseCPUs(c.CPUs)
	parseErr("cpus", e)
	x.defaults.MemoryBytes, e = sandbox.ParseMemory(c.Memory)
	parseErr("memory", e)
	x.maxCPUs, e = sandbox.ParseCPUs(c.MaxCPUs)
	parseErr("max_cpus", e)
	x.maxMem, e = sandbox.ParseMemory(c.MaxMemory)
	parseErr("max_memory", e)
	tmp, e := sandbox.ParseMemory(c.TmpSize)
	parseErr("tmp_size", e)
	x.defaults.Pids = c.MaxProcesses
	if err != nil {
		return err
	}
	mgr, err := sandbox.New(sandbox.Config{
		Bwrap:    c.Bwrap,
		StateDir: filepath.Join(s.cfg.DataDir, "kernels"),
		UIDBase:  c.UIDBase,
		UIDCount: c.UIDCount,
		ROBinds:  c.ROBinds,
		TmpSize:  tmp,
		Logger:   s.log,
	})
	if err != nil {
		s.log.Error("SANDBOX UNAVAILABLE: kernels and exec commands run as PLAIN PROCESSES with the server's privileges; "+
			"any code run can read the database and every workspace. Fix the cause, or set sandbox.enabled=false to acknowledge.",
			"err", err)
		return nil
	}
	if err := os.MkdirAll(x.spoolDir, 0o700); err == nil {
		err = mgr.CheckMountable(x.spoolDir)
	}
	if err != nil {
		_ = mgr.Close()
		s.log.Error("SANDBOX UNAVAILABLE: the checkpoint spool dir cannot be idmapped into sandboxes (set persistence.spool_dir "+
			"to a directory on the data dir's filesystem); kernels and exec commands run as PLAIN PROCESSES", "spool_dir", x.spoolDir, "err", err)
		return nil
	}
	x.mgr = mgr
	if s.kopts.Transport == "tcp" {
		// A kernel in its own network namespace listens on its own loopback, out of the server's reach.
		s.log.Warn("sandbox: kernel.transport=tcp cannot reach sandboxed kernels; using ipc")
		s.kopts.Transport = "ipc"
	}
	// A sandbox can leave set-uid files in its workspace (idmapped: they are root's on disk); nobody
	// but the server may reach them.
	_ = os.Chmod(workspacesDir(s.cfg), 0o700)
	spec := *s.kopts.Spec
	// SIGINT to the process group would hit bubblewrap, which dies of it and takes the kernel along;
	// an interrupt_request makes ipykernel signal itself inside the sandbox.
	spec.InterruptMode = "message"
	s.kopts.Spec = &spec
	x.env = map[string]string{
		"HOME": "/tmp", "LANG": "C.UTF-8", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
		"IPYTHONDIR": "/tmp/.ipython", "MPLCONFIGDIR": "/tmp/.matplotlib",
	}
	for k, v := range spec.Env {
		x.env[k] = v
	}
	for k, v := range s.kopts.Env {
		x.env[k] = v
	}
	s.kopts.Wrap = x.wrapper(s.cfg.Sandbox.Network)
	s.sbx = x
	info := mgr.Info()
	s.log.Info("sandbox: kernels and exec commands run under bubblewrap", "cgroup", info.Cgroup,
		"controllers", info.Controls, "idmapped", info.IDMapped, "defaults", x.defaults.String())
	return nil
}

// wrapper is the kernel.Options.Wrap of kernels with the given network setting.
func (x *sandboxes) wrapper(network bool) func([]string, string) ([]string, error) {
	return func(argv []string, rt string) ([]string, error) {
		kb, err := x.kernelBox(rt, network)
		if err != nil {
			return nil, err
		}
		// The kernel (the box uid) reads the connection file and creates its ipc sockets here.
		if uid := kb.box.UID(); uid != 0 {
			for _, p := range []string{rt, filepath.Join(rt, "connection.json")} {
				if err := os.Lchown(p, uid, uid); err != nil { // never through a link the kernel made
					return nil, fmt.Errorf("sandbox: %w", err)
				}
			}
		}
		return kb.box.Command(sandbox.Command{Argv: argv, Dir: "/workspace", Env: x.env,
			Binds: []sandbox.Bind{{Src: rt, Dst: rt}}}), nil
	}
}

// kernelBox returns the box of the kernel whose runtime dir is rt, making it on the first start.
func (x *sandboxes) kernelBox(rt string, network bool) (*kernelBox, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if kb := x.kerns[rt]; kb != nil {
		return kb, nil
	}
	// Kernels the pool discarded (died while idle) are shut down without stopKernel: their runtime
	// dir is gone, so is their need for a box.
	for dir, kb := range x.kerns {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			x.releaseLocked(dir, kb)
		}
	}
	box, err := x.mgr.NewBox(sandbox.BoxOptions{Name: filepath.Base(rt), Network: network, Limits: x.defaults})
	if err != nil {
		return nil, err
	}
	kb := &kernelBox{box: box, spool: filepath.Join(x.spoolDir, "sbx-"+box.Name())}
	if err := os.MkdirAll(kb.spool, 0o700); err != nil {
		_ = box.Release()
		return nil, err
	}
	if err := box.Mount("spool", kb.spool); err != nil {
		_ = box.Release()
		_ = os.RemoveAll(kb.spool)
		return nil, err
	}
	x.kerns[rt] = kb
	return kb, nil
}

func (x *sandboxes) lookup(k *kernel.Kernel) *kernelBox {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.kerns[k.RuntimeDir()]
}

func (x *sandboxes) releaseLocked(rt string, kb *kernelBox) {
	delete(x.kerns, rt)
	if err := kb.box.Release(); err != nil {
		x.log.Warn("sandbox: release", "box", kb.box.Name(), "err", err)
	}
	_ = os.RemoveAll(kb.spool)
}

// limitsFor turns a session's sandbox settings into limits: its own values within the ceilings,
// else the configured defaults.
func (x *sandboxes) limitsFor(sb carryover.Sandbox) (sandbox.Limits, error) {
	l := x.defaults
	if sb.CPUs != "" {
		c, err := sandbox.ParseCPUs(sb.CPUs)
		if err != nil {
			return l, carryover.Errorf(carryover.CodeInvalid, "sandbox.%v", err).WithDetails("field", "sandbox.cpus")
		}
		if x.maxCPUs > 0 && c > x.maxCPUs {
			return l, carryover.Errorf(carryover.CodeInvalid, "sandbox.cpus %q is over the server's ceiling of %g", sb.CPUs, x.maxCPUs).WithDetails("field", "sandbox.cpus")
		}
		l.CPUs = c
	}
	if sb.Memory != "" {
		m, err := sandbox.ParseMemory(sb.Memory)
		if err != nil {
			return l, carryover.Errorf(carryover.CodeInvalid, "sandbox.%v", err).WithDetails("field", "sandbox.memory")
		}
		if x.maxMem > 0 && m > x.maxMem {
			return l, carryover.Errorf(carryover.CodeInvalid, "sandbox.memory %q is over the server's ceiling of %s", sb.Memory, sandbox.FormatMemory(x.maxMem)).WithDetails("field", "sandbox.memory")
		}
		l.MemoryBytes = m
	}
	return l, nil
}

// claimKernel hands out a kernel for the session: a warm one from the pool, or, when the session's
// network setting differs from the pool's (a network namespace cannot be swapped under a running
// process), a new one started for it.
func (s *Service) claimKernel(ctx context.Context, doc carryover.Session) (*kernel.Kernel, error) {
	if s.sbx == nil || doc.Sandbox.Network == s.cfg.Sandbox.Network {
		return s.pool.Get(ctx)
	}
	opts := s.kopts
	opts.Wrap = s.sbx.wrapper(doc.Sandbox.Network)
	k, err := kernel.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := s.installAgent(ctx, k); err != nil {
		_ = k.Shutdown(context.WithoutCancel(ctx))
		s.releaseSandbox(k)
		return nil, err
	}
	return k, nil
}

// attachSandbox gives a claimed kernel the session's workspace and limits (prepareKernel calls it on
// every claim and context change; attaching again is a no-op).
func (s *Service) attachSandbox(id string, k *kernel.Kernel, doc carryover.Session) error {
	if s.sbx == nil {
		return nil
	}
	kb := s.sbx.lookup(k)
	if kb == nil {
		return fmt.Errorf("sandbox: kernel %s has no sandbox", k.ID())
	}
	if kb.box.Network() != doc.Sandbox.Network {
		return fmt.Errorf("sandbox: kernel %s has network=%v, the session wants %v", k.ID(), kb.box.Network(), doc.Sandbox.Network)
	}
	lim, err := s.sbx.limitsFor(doc.Sandbox)
	if err != nil {
		return err
	}
	if err := kb.box.Attach(s.workspace(id)); err != nil {
		return err
	}
	if err := kb.box.SetLimits(lim); err != nil {
		s.log.Warn("sandbox: limits not fully applied", "session", id, "limits", lim.String(), "err", err)
	}
	kb.mu.Lock()
	first := kb.session != id
	kb.session = id
	kb.mu.Unlock()
	if first {
		go s.watchSandbox(id, k, kb)
	}
	return nil
}

// sandboxSpool says where a sandboxed kernel's checkpoint spool is, for the server and for the kernel.
func (s *Service) sandboxSpool(k *kernel.Kernel) (host, inside string, ok bool) {
	if s.sbx == nil {
		return "", "", false
	}
	kb := s.sbx.lookup(k)
	if kb == nil {
		return "", "", false
	}
	return kb.spool, sandbox.MountTarget("spool"), true
}

// kernelDir maps a workspace path (/workspace/..., or relative) to the path the kernel uses: inside
// the sandbox it is /workspace/...; a plain kernel uses the host directory.
func (s *Service) kernelDir(id, p string) string {
	if s.sbx == nil {
		return s.hostPath(id, p)
	}
	p = strings.TrimPrefix(p, "/workspace")
	return path.Join("/workspace", strings.TrimPrefix(p, "/"))
}

// releaseSandbox frees a stopped kernel's box (processes, mounts, cgroup, uid, spool).
func (s *Service) releaseSandbox(k *kernel.Kernel) {
	if s.sbx == nil {
		return
	}
	s.sbx.mu.Lock()
	defer s.sbx.mu.Unlock()
	if kb := s.sbx.kerns[k.RuntimeDir()]; kb != nil {
		s.sbx.releaseLocked(k.RuntimeDir(), kb)
	}
}

// closeSandbox releases what is left (idle pool kernels are shut down without stopKernel) and
// undoes the manager's mounts and cgroups. Kernels must be shut down before.
func (s *Service) closeSandbox() {
	if s.sbx == nil {
		return
	}
	s.sbx.mu.Lock()
	for rt, kb := range s.sbx.kerns {
		s.sbx.releaseLocked(rt, kb)
	}
	s.sbx.mu.Unlock()
	if err := s.sbx.mgr.Close(); err != nil {
		s.log.Warn("sandbox: close", "err", err)
	}
}

// mkdirWorkspace creates the workspace dir rel (and its parents) through an os.Root: a symlink a
// kernel left in its workspace cannot make the server, root, create directories elsewhere.
func (s *Service) mkdirWorkspace(id, rel string) error {
	ws := s.workspace(id)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	if rel == "" {
		return nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.FromSlash(rel), 0o755); err != nil {
		return fileErr(rel, err)
	}
	return nil
}

// execArgv is what Exec runs: argv itself without a sandbox, else argv wrapped into a box of its own.
func (s *Service) execArgv(id string, doc carryover.Session, argv []string, rel string, reqEnv map[string]string) ([]string, func(), error) {
	if s.sbx == nil {
		return argv, func() {}, nil
	}
	env := map[string]string{}
	for k, v := range doc.AgentContext.EnvVars {
		env[k] = v
	}
	for k, v := range reqEnv {
		env[k] = v
	}
	return s.sandboxExec(id, doc, argv, rel, env)
}

// sandboxExec wraps a shell command into a box of its own with the session's workspace, network
// setting and limits; release frees the box once the command is over.
func (s *Service) sandboxExec(id string, doc carryover.Session, argv []string, rel string, env map[string]string) (wrapped []string, release func(), err error) {
	lim, err := s.sbx.limitsFor(doc.Sandbox)
	if err != nil {
		return nil, nil, err
	}
	box, err := s.sbx.mgr.NewBox(sandbox.BoxOptions{Name: fmt.Sprintf("x%d", s.sbx.seq.Add(1)), Network: doc.Sandbox.Network, Limits: lim})
	if err != nil {
		return nil, nil, err
	}
	release = func() {
		if err := box.Release(); err != nil {
			s.log.Warn("sandbox: release exec box", "session", id, "err", err)
		}
	}
	if err := box.Attach(s.workspace(id)); err != nil {
		release()
		return nil, nil, err
	}
	full := map[string]string{"HOME": "/tmp", "LANG": "C.UTF-8"}
	for k, v := range env {
		full[k] = v
	}
	return box.Command(sandbox.Command{Argv: argv, Dir: path.Join("/workspace", rel), Env: full}), release, nil
}

// watchSandbox watches a claimed kernel's box for limit hits until the kernel dies. A memory limit
// hit is the OOM killer's business (the kernel dies and is restored); it is recorded as an event.
// A process limit hit means a fork bomb or a runaway pool: every process but the kernel is killed,
// so the limit frees up and the kernel keeps its state; if the kernel keeps forking (three hits in
// five seconds) the whole sandbox is killed and the session restored from its last checkpoint.
func (s *Service) watchSandbox(id string, k *kernel.Kernel, kb *kernelBox) {
	base := kb.box.Events()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var strikes []time.Time
	dead := k.Dead()
	for {
		select {
		case <-dead:
			if ev := kb.box.Events(); ev.OOMKills > base.OOMKills {
				s.sandboxEvent(id, k, kb, "memory", "the kernel was killed by the out-of-memory killer; the session is restored from its last checkpoint")
			}
			return
		case <-tick.C:
		}
		kb.mu.Lock()
		mine := kb.session == id
		kb.mu.Unlock()
		if !mine {
			return
		}
		ev := kb.box.Events()
		if ev.OOMKills > base.OOMKills {
			// The victim may be the kernel (it then dies once its memory is freed, which takes a while
			// for gigabytes) or a process it started.
			select {
			case <-dead:
				continue // reported above, base untouched
			case <-time.After(2 * time.Second):
			}
			base.OOMKills = ev.OOMKills
			s.sandboxEvent(id, k, kb, "memory", "a process of the sandbox was killed by the out-of-memory killer; the kernel survived")
		}
		if ev.PidsMax > base.PidsMax {
			base.PidsMax = ev.PidsMax
			now := time.Now()
			keep := strikes[:0]
			for _, t := range strikes {
				if now.Sub(t) < 5*time.Second {
					keep = append(keep, t)
				}
			}
			strikes = append(keep, now)
			if len(strikes) >= 3 {
				msg := fmt.Sprintf("the process limit (%d) was hit again and again: the sandbox was killed; the session is restored from its last checkpoint", kb.box.Limits().Pids)
				appendKernelLog(k, "carryover sandbox: "+msg)
				kb.box.Kill()
				s.sandboxEvent(id, k, kb, "pids", msg)
				return
			}
			n := kb.box.KillStrays(k.PID())
			base.PidsMax = kb.box.Events().PidsMax // its own refusals while killing are not new hits
			s.sandboxEvent(id, k, kb, "pids", fmt.Sprintf("the process limit (%d) was hit: %d processes were killed; the kernel and its state were kept", kb.box.Limits().Pids, n))
		}
	}
}

// sandboxEvent logs a limit hit and records it as a sandbox_limit_exceeded event of the session.
func (s *Service) sandboxEvent(id string, k *kernel.Kernel, kb *kernelBox, limit, msg string) {
	lim := kb.box.Limits()
	s.log.Warn("sandbox limit hit", "session", id, "kernel", k.ID(), "limit", limit, "limits", lim.String(), "action", msg)
	sandboxLimitHits.WithLabelValues(limit).Inc()
	ls, err := s.get(id)
	if err != nil {
		return // an ephemeral /api/execute session
	}
	payload := map[string]any{"sandbox_id": "sbx_" + k.ID(), "limit": limit, "message": msg,
		"limits": map[string]any{"memory_bytes": lim.MemoryBytes, "cpus": lim.CPUs, "max_processes": lim.Pids}}
	s.emit(context.Background(), ls, "sandbox_limit_exceeded", payload)
}

// appendKernelLog adds a line to the kernel's log, where a death error's log tail will show it.
func appendKernelLog(k *kernel.Kernel, line string) {
	f, err := os.OpenFile(k.LogPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString("\n" + line + "\n")
}

var sandboxLimitHits = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "carryover_sandbox_limit_hits_total", Help: "Sandbox limit hits by limit (memory: OOM kills, pids: fork refusals).",
}, []string{"limit"})

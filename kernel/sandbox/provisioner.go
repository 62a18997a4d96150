package sandbox

// provisioner.go makes the sandbox a kernel.Provisioner: every kernel runs in a box of its own, made
// when the kernel is launched (usually long before a session claims it from the warm pool) and kept
// across its restarts; claiming it mounts the session's workspace onto the box's /workspace mount
// point, where it propagates into the running sandbox (AttachWorkspace), and applies the session's
// limits (SetLimits). A shell command gets a box of its own for its lifetime.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/carryover/carryover/kernel"
)

// ProvisionerConfig configures a Provisioner. Zero limits mean none.
type ProvisionerConfig struct {
	Defaults  Limits  // every box's limits unless its session asks for others
	MaxCPUs   float64 // ceilings of what a session may ask for
	MaxMemory int64
	// SpoolDir holds each kernel's checkpoint spool dir (sbx-<box>), idmapped into its box at
	// MountTarget("spool"); it must pass Manager.CheckMountable.
	SpoolDir string
	// Packages, when set, is where pip installs in every box (packages.go): inside the workspace,
	// so packages persist with its files.
	Packages *PackagePaths
	// Disks, when set, puts every workspace on a file system of its own (disk.go).
	Disks *Disks
	// Forker, when set, makes kernels by forking a warm template into their boxes (fork.go); a
	// kernel it cannot make (not forkable, no template ready) is started cold. Close closes it.
	Forker Forker
	// SpareBoxes is how many boxes to keep ready for forked kernels (spare.go, pool.spare_boxes);
	// 0: each launch makes its own. Only with a Forker.
	SpareBoxes int
	Logger     *slog.Logger
}

// Provisioner runs kernels and commands in boxes of a Manager.
type Provisioner struct {
	m      *Manager
	cfg    ProvisionerConfig
	log    *slog.Logger
	seq    atomic.Int64  // names of command and spare boxes
	sleep  string        // the holder of a box a kernel is forked into (fork.go)
	spares *spares       // boxes made ahead for forked kernels (nil: none)
	cold   atomic.Int64  // kernels started cold while a Forker was set (TemplateStats)
	counts counterPoller // reads the watched boxes' limit-hit counters (watch.go)
}

var _ kernel.Provisioner = (*Provisioner)(nil)

// NewProvisioner returns a Provisioner that makes its boxes in m (Close closes m).
func NewProvisioner(m *Manager, cfg ProvisionerConfig) *Provisioner {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Provisioner{m: m, cfg: cfg, log: cfg.Logger}
	if cfg.Forker != nil {
		// The holder runs in the box: it must be under /usr, which every box binds read-only.
		if sleep, err := exec.LookPath("sleep"); err == nil {
			sleep, _ = filepath.EvalSymlinks(sleep)
			if strings.HasPrefix(sleep, "/usr/") {
				p.sleep = sleep
			}
		}
		if p.sleep == "" {
			p.log.Warn("sandbox: no sleep under /usr for the boxes' holders: kernels are not forked from the template")
			_ = cfg.Forker.Close()
			p.cfg.Forker = nil
		}
	}
	if p.cfg.Forker != nil && cfg.SpareBoxes > 0 {
		p.spares = newSpares(p, cfg.SpareBoxes)
	}
	return p
}

// KernelEnv is a box's kernel environment apart from the kernel's own variables: what a template
// whose kernels are forked into boxes is started with, so it imports what they would.
func (c ProvisionerConfig) KernelEnv() map[string]string {
	env := kernelEnv(nil)
	env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	env["PYTHONPATH"] = SkillsPath
	c.Packages.env(env)
	return env
}

// IsolatesNetwork is true: a box without network has its own network namespace (only loopback).
func (p *Provisioner) IsolatesNetwork() bool { return true }

// Manager is the Manager the boxes are made in.
func (p *Provisioner) Manager() *Manager { return p.m }

// Defaults are the limits of a box whose session asks for none.
func (p *Provisioner) Defaults() Limits { return p.cfg.Defaults }

// Close releases every box left and undoes the Manager's mounts and cgroups. Kernels should be shut
// down before.
func (p *Provisioner) Close() error {
	var err error
	p.spares.close()
	if p.cfg.Forker != nil {
		err = p.cfg.Forker.Close()
	}
	err = errors.Join(err, p.m.Close())
	if p.cfg.Disks != nil {
		err = errors.Join(err, p.cfg.Disks.Close())
	}
	return err
}

// DisksEnabled, EnsureWorkspaceDisk and RemoveWorkspaceDisk give workspaces a disk of their own
// (kernels.WorkspaceDisks, server/session/kernels) when sandbox.disk is set.
func (p *Provisioner) DisksEnabled() bool { return p.cfg.Disks != nil }

func (p *Provisioner) EnsureWorkspaceDisk(dir string, size int64) error {
	if p.cfg.Disks == nil {
		return nil
	}
	return p.cfg.Disks.EnsureWorkspaceDisk(dir, size)
}

func (p *Provisioner) RemoveWorkspaceDisk(dir string) error {
	if p.cfg.Disks == nil {
		return nil
	}
	return p.cfg.Disks.RemoveWorkspaceDisk(dir)
}

// HealWorkspaceDisk repairs a workspace disk an I/O error of the host made read-only
// (Disks.HealWorkspaceDisk; kernels.DiskHealer).
func (p *Provisioner) HealWorkspaceDisk(dir string, release func()) (bool, error) {
	if p.cfg.Disks == nil {
		return false, nil
	}
	return p.cfg.Disks.HealWorkspaceDisk(dir, release)
}

// NoteLostWrites takes a failed sync of dir's disk (Disks.NoteLostWrites).
func (p *Provisioner) NoteLostWrites(dir string) {
	if p.cfg.Disks != nil {
		p.cfg.Disks.NoteLostWrites(dir)
	}
}

// WorkspaceDiskFailed says whether dir's disk needs HealWorkspaceDisk.
func (p *Provisioner) WorkspaceDiskFailed(dir string) bool {
	return p.cfg.Disks != nil && p.cfg.Disks.WorkspaceDiskFailed(dir)
}

// hostEnv is the environment of the wrapper that becomes bubblewrap, which clears it for the box.
var hostEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}

// kernelEnv is a sandboxed kernel's environment besides PATH (bubblewrap clears everything else):
// HOME and Python's and matplotlib's config dirs in the box's private /tmp.
func kernelEnv(own map[string]string) map[string]string {
	env := map[string]string{
		"HOME": "/tmp", "LANG": "C.UTF-8", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
		"IPYTHONDIR": "/tmp/.ipython", "MPLCONFIGDIR": "/tmp/.matplotlib",
	}
	for k, v := range own {
		env[k] = v
	}
	return env
}

// Launch starts a kernel in its box: a new box named after the runtime dir, or on a restart the box
// of spec.Previous. The runtime dir is bound in at the same path (the kernel reads the connection
// file and creates its ipc sockets there, as the box uid).
func (p *Provisioner) Launch(ctx context.Context, spec kernel.LaunchSpec) (kernel.KernelProcess, error) {
	forkable := p.cfg.Forker != nil && !spec.Fresh && p.cfg.Forker.Forkable(spec)
	kb, fresh := (*kernelBox)(nil), false
	var sp *spare
	if prev, ok := spec.Previous.(*boxKernel); ok && prev.kb.box.m == p.m {
		kb = prev.kb
		// A restart starts in the session's workspace: its packages dir must exist now (packages.go).
		if err := p.cfg.Packages.makeDirs(kb.box.Attached()); err != nil {
			return nil, fmt.Errorf("launch in sandbox: %w", err)
		}
	} else {
		if forkable && !spec.Network && spec.NetworkAllow == nil {
			sp = p.spares.take(filepath.Dir(spec.RuntimeDir))
		}
		if sp != nil {
			kb = sp.kb
		} else {
			var err error
			if kb, err = p.newKernelBox(filepath.Base(spec.RuntimeDir), spec.Network, spec.NetworkAllow); err != nil {
				return nil, err
			}
		}
		fresh = true
	}
	fail := func(err error) (kernel.KernelProcess, error) {
		if fresh {
			kb.release()
		}
		return nil, fmt.Errorf("launch in sandbox: %w", err)
	}
	if uid := kb.box.UID(); uid != 0 {
		for _, f := range []string{spec.RuntimeDir, filepath.Join(spec.RuntimeDir, "connection.json")} {
			if err := os.Lchown(f, uid, uid); err != nil { // never through a link the kernel made
				if sp != nil {
					sp.lp.Kill()
				}
				return fail(err)
			}
		}
	}
	env := p.launchEnv(spec.Env)
	if forkable {
		k, err := p.launchForkedOrSpare(ctx, spec, kb, sp, env)
		if err == nil {
			return k, nil
		}
		if ctx.Err() != nil {
			return fail(err)
		}
		p.log.Warn("sandbox: kernel not forked from the template; starting it cold", "box", kb.box.Name(), "err", err)
	}
	if p.cfg.Forker != nil {
		p.cold.Add(1)
	}
	return p.launchCold(spec, kb, fresh, fail, env)
}

// launchForkedOrSpare forks the kernel into the spare box sp, or into kb's own new holder.
func (p *Provisioner) launchForkedOrSpare(ctx context.Context, spec kernel.LaunchSpec, kb *kernelBox, sp *spare, env map[string]string) (*boxKernel, error) {
	if sp != nil {
		return p.launchSpare(ctx, spec, sp, env)
	}
	return p.launchForked(ctx, spec, kb, env)
}

// launchCold starts the kernel's own Python as the box's first process.
func (p *Provisioner) launchCold(spec kernel.LaunchSpec, kb *kernelBox, fresh bool, fail func(error) (kernel.KernelProcess, error), env map[string]string) (kernel.KernelProcess, error) {
	argv := kb.box.Command(Command{Argv: spec.Argv, Dir: "/workspace", Env: env,
		Binds: []Bind{{Src: spec.RuntimeDir, Dst: spec.RuntimeDir}}})
	lp, err := kb.box.Start(kernel.ProcessSpec{Argv: argv, Env: hostEnv, Dir: spec.Dir, LogPath: spec.LogPath})
	if err != nil {
		return fail(err)
	}
	k := &boxKernel{boxProcess: boxProcess{LocalProcess: lp, box: kb.box}, kb: kb, logPath: spec.LogPath}
	if !fresh {
		k.rewatch() // a restart in the same box: whoever heard of its limit hits still does
	}
	return k, nil
}

// launchEnv is a kernel's environment in its box: the box's base, PYTHONPATH, the packages' paths,
// and the kernel's own variables (own).
func (p *Provisioner) launchEnv(own map[string]string) map[string]string {
	env := kernelEnv(own)
	env["PYTHONPATH"] = SkillsPath
	p.cfg.Packages.env(env)
	return env
}

// newKernelBox makes a kernel's box with its spool dir mounted.
func (p *Provisioner) newKernelBox(name string, network bool, allow []string) (*kernelBox, error) {
	box, err := p.m.NewBox(BoxOptions{Name: name, Network: network, Allow: allow, Limits: p.cfg.Defaults})
	if err != nil {
		return nil, err
	}
	kb := &kernelBox{p: p, box: box, spool: filepath.Join(p.cfg.SpoolDir, "sbx-"+box.Name())}
	if err := p.cfg.Packages.makeDirs(filepath.Join(box.dir, "workspace")); err != nil {
		_ = box.Release()
		return nil, err
	}
	if err := os.MkdirAll(kb.spool, 0o700); err != nil {
		_ = box.Release()
		return nil, err
	}
	if err := box.Mount("spool", kb.spool); err != nil {
		kb.release()
		return nil, err
	}
	return kb, nil
}

// Command runs a shell command in a box of its own with the workspace at /workspace, HOME=/tmp and
// the given limits; Cleanup releases the box.
func (p *Provisioner) Command(_ context.Context, spec kernel.CommandSpec) (kernel.Process, error) {
	lim, err := p.limits(spec.Limits)
	if err != nil {
		return nil, err
	}
	box, err := p.m.NewBox(BoxOptions{Name: fmt.Sprintf("x%d", p.seq.Add(1)), Network: spec.Network, Allow: spec.NetworkAllow, Limits: lim})
	if err != nil {
		return nil, err
	}
	if err := box.Attach(spec.Workspace); err != nil {
		p.release(box)
		return nil, err
	}
	if spec.Skills != "" {
		if err := box.AttachSkills(spec.Skills, spec.SkillsWritable); err != nil {
			p.release(box)
			return nil, err
		}
	}
	env := map[string]string{"HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONPATH": SkillsPath}
	p.cfg.Packages.env(env)
	for k, v := range spec.Env {
		env[k] = v
	}
	argv := box.Command(Command{Argv: spec.Argv, Dir: workspacePath(spec.Workspace, spec.Dir), Env: env})
	lp, err := box.Start(kernel.ProcessSpec{Argv: argv, Env: hostEnv, Dir: spec.Dir, Stdout: spec.Stdout, Stderr: spec.Stderr})
	if err != nil {
		p.release(box)
		return nil, err
	}
	return &commandProcess{boxProcess{LocalProcess: lp, box: box}}, nil
}

func (p *Provisioner) release(b *Box) {
	if err := b.Release(); err != nil {
		p.log.Warn("sandbox: release", "box", b.Name(), "err", err)
	}
}

// workspacePath maps a host path in the workspace ws to the box's view, /workspace/...
func workspacePath(ws, host string) string {
	rel := host
	if ws != "" {
		if r, err := filepath.Rel(ws, host); err == nil {
			rel = r
		}
	}
	if rel == "." {
		rel = ""
	}
	return path.Join("/workspace", strings.TrimPrefix(filepath.ToSlash(rel), "/"))
}

// limits turns a session's wishes into limits: its own values within the ceilings, else the defaults.
func (p *Provisioner) limits(want kernel.Limits) (Limits, error) {
	l := p.cfg.Defaults
	if want.CPUs != "" {
		c, err := kernel.ParseCPUs(want.CPUs)
		if err != nil {
			return l, &kernel.LimitError{Field: "cpus", Message: err.Error()}
		}
		if p.cfg.MaxCPUs > 0 && c > p.cfg.MaxCPUs {
			return l, &kernel.LimitError{Field: "cpus", Message: fmt.Sprintf("cpus %q is over the server's ceiling of %g", want.CPUs, p.cfg.MaxCPUs)}
		}
		l.CPUs = c
	}
	if want.Memory != "" {
		m, err := kernel.ParseMemory(want.Memory)
		if err != nil {
			return l, &kernel.LimitError{Field: "memory", Message: err.Error()}
		}
		if p.cfg.MaxMemory > 0 && m > p.cfg.MaxMemory {
			return l, &kernel.LimitError{Field: "memory", Message: fmt.Sprintf("memory %q is over the server's ceiling of %s", want.Memory, kernel.FormatMemory(p.cfg.MaxMemory))}
		}
		l.MemoryBytes = m
	}
	return l, nil
}

// Package kernels makes the kernels of a node's sessions, knowing nothing of any one session beyond
// the document it is handed: the warm pool and the launch options (the kernel.Provisioner runs
// kernels and exec commands), the agent installed into each new kernel, a kernel attached to a
// session's workspace, limits and skills and given its set-up (setup.go), and the workspaces' disks
// (disk.go). The session service (server/session) holds one Factory and claims through it; this
// package imports nothing of the service.
package kernels

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/agentops"
	"github.com/carryover/carryover/server/session/skills"
)

// Config is what the factory needs of the service's configuration.
type Config struct {
	DataDir        string   // workspaces/ and disks/ live under it
	Spool          string   // where kernels and the server exchange checkpoint data (session.Config.Spool)
	Network        bool     // sandbox.network: the pool's network setting
	PreImport      []string // persistence.pre_import: the pool's kernels import these
	MaxDisk        string   // sandbox.max_disk: the largest sandbox.disk a session may ask for
	MaxOutputBytes int64    // run.max_output_bytes: the output guard the agent installs
}

// Workspace is the host directory that is session id's /workspace.
func Workspace(dataDir, id string) string { return filepath.Join(dataDir, "workspaces", id) }

// Factory makes the kernels of this node's sessions.
type Factory struct {
	cfg    Config
	opts   kernel.Options
	pool   *kernel.Pool
	ckpt   *persistence.Checkpointer
	skills *skills.Skills
	log    *slog.Logger
	// onLimit is told of a kernel's limit hit (the service's sandboxEvent: an event of its session).
	onLimit func(id string, k *kernel.Kernel, hit kernel.LimitHit)
}

// Deps is what a Factory works with: the launch options (their Provisioner and Network are set by
// Start), the checkpoint engine that installs the agent, the tenants' skills, the log, and whom
// to tell of a limit hit.
type Deps struct {
	Options kernel.Options
	Ckpt    *persistence.Checkpointer
	Skills  *skills.Skills
	Log     *slog.Logger
	OnLimit func(id string, k *kernel.Kernel, hit kernel.LimitHit)
}

// New is a factory with no pool yet (Start makes it).
func New(cfg Config, d Deps) *Factory {
	return &Factory{cfg: cfg, opts: d.Options, ckpt: d.Ckpt, skills: d.Skills, log: d.Log, onLimit: d.OnLimit}
}

// Start points the launch options at p (local processes when nil) and starts the warm pool.
func (f *Factory) Start(p kernel.Provisioner, pc kernel.PoolConfig) {
	f.useProvisioner(p)
	f.pool = kernel.NewPoolWith(pc, f.opts, f.installAgent, f.warmKernel)
}

// Pool is the warm pool (nil before Start).
func (f *Factory) Pool() *kernel.Pool { return f.pool }

// Provisioner runs the kernels and the exec commands.
func (f *Factory) Provisioner() kernel.Provisioner { return f.opts.Provisioner }

// Close stops the pool and its kernels.
func (f *Factory) Close(ctx context.Context) error {
	if f.pool == nil {
		return nil
	}
	return f.pool.Close(ctx)
}

// workspace is the host directory that is session id's /workspace.
func (f *Factory) workspace(id string) string { return Workspace(f.cfg.DataDir, id) }

// useProvisioner points the kernel options at p (local processes when nil).
func (f *Factory) useProvisioner(p kernel.Provisioner) {
	if p == nil {
		p = &kernel.LocalProvisioner{SpoolRoot: f.cfg.Spool}
	}
	f.opts.Provisioner = p
	f.opts.Network = f.cfg.Network
	if kernel.IsolatesNetwork(p) && f.opts.Transport == "tcp" {
		// A kernel in its own network namespace listens on its own loopback, out of the server's reach.
		f.log.Warn("sandbox: kernel.transport=tcp cannot reach sandboxed kernels; using ipc")
		f.opts.Transport = "ipc"
	}
}

// installAgent loads the agent into a new kernel and has it guard the kernel's output, in one
// request where it can (persistence's Install; the pool's onStart hook).
func (f *Factory) installAgent(ctx context.Context, k *kernel.Kernel) error {
	host, inside := k.Process().Spool() // removed by the provisioner when the kernel shuts down
	return f.ckpt.Install(ctx, k, host, inside, agentops.OutputGuard(f.cfg.MaxOutputBytes))
}

// warmKernel imports the configured modules into a kernel bound for the pool (the pool's onWarm hook).
func (f *Factory) warmKernel(ctx context.Context, k *kernel.Kernel) error { return f.ckpt.Warm(ctx, k) }

// OwnSpec is a copy of spec (nil: the "python" kernelspec found on this machine, pointed at python)
// whose kernels keep their IPython history in memory: a shared ~/.ipython history.sqlite lets one
// session's %history see another's code and, under load, its "database is locked" message lands in
// other users' output and stalls kernels for seconds. On a copy: the caller's Spec is not ours to
// change (parallel tests share one; writing to it raced, and a second service on it got the flag
// twice).
func OwnSpec(spec *kernel.Spec, python string) (*kernel.Spec, error) {
	if spec == nil {
		found, err := kernel.FindSpec("python", python)
		if err != nil {
			return nil, fmt.Errorf("server: kernelspec: %w", err)
		}
		spec = found
	}
	own := *spec
	own.Argv = append(append([]string(nil), spec.Argv...), "--HistoryManager.hist_file=:memory:")
	return &own, nil
}

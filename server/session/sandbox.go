package session

// sandbox.go picks where kernels and exec commands run (a kernel.Provisioner: kernel/sandbox's
// bubblewrap boxes when sandbox.enabled and possible, else plain local processes), and connects a
// claimed kernel's process to its session: workspace, limits, and limit hits as events. The
// README's "Sandbox and threat model" says what the sandbox isolates and what it does not.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/kernel/sandbox"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// initProvisioner points the kernel options at a provisioner: the sandbox when sandbox.enabled and it
// can run here, else the local one (loudly, when the sandbox was wanted). Bad limit values are an error.
func (s *Service) initProvisioner() error {
	local := &kernel.LocalProvisioner{SpoolRoot: spoolDir(s.cfg)}
	s.kopts.Provisioner = local
	s.kopts.Network = s.cfg.Sandbox.Network
	if !s.cfg.Sandbox.Enabled {
		s.log.Warn("sandbox disabled (sandbox.enabled=false): kernels and exec commands run as plain processes with the server's privileges")
		return nil
	}
	pc, tmp, err := s.sandboxConfig()
	if err != nil {
		return err
	}
	c := s.cfg.Sandbox
	mgr, err := sandbox.New(sandbox.Config{
		Bwrap: c.Bwrap, StateDir: filepath.Join(s.cfg.DataDir, "kernels"), UIDBase: c.UIDBase, UIDCount: c.UIDCount,
		ROBinds: c.ROBinds, TmpSize: tmp, Logger: s.log,
	})
	if err != nil {
		s.log.Error("SANDBOX UNAVAILABLE: kernels and exec commands run as PLAIN PROCESSES with the server's privileges; "+
			"any code run can read the database and every workspace. Fix the cause, or set sandbox.enabled=false to acknowledge.",
			"err", err)
		return nil
	}
	if err := os.MkdirAll(pc.SpoolDir, 0o700); err == nil {
		err = mgr.CheckMountable(pc.SpoolDir)
	}
	if err != nil {
		_ = mgr.Close()
		s.log.Error("SANDBOX UNAVAILABLE: the checkpoint spool dir cannot be idmapped into sandboxes (set persistence.spool_dir "+
			"to a directory on the data dir's filesystem); kernels and exec commands run as PLAIN PROCESSES", "spool_dir", pc.SpoolDir, "err", err)
		return nil
	}
	if s.kopts.Transport == "tcp" {
		// A kernel in its own network namespace listens on its own loopback, out of the server's reach.
		s.log.Warn("sandbox: kernel.transport=tcp cannot reach sandboxed kernels; using ipc")
		s.kopts.Transport = "ipc"
	}
	// A sandbox can leave set-uid files in its workspace (idmapped: they are root's on disk); nobody
	// but the server may reach them.
	_ = os.Chmod(workspacesDir(s.cfg), 0o700)
	s.kopts.Provisioner = sandbox.NewProvisioner(mgr, pc)
	info := mgr.Info()
	s.log.Info("sandbox: kernels and exec commands run under bubblewrap", "cgroup", info.Cgroup,
		"controllers", info.Controls, "idmapped", info.IDMapped, "defaults", pc.Defaults.String())
	return nil
}

// sandboxConfig parses the sandbox section's limits and ceilings, and the size of each box's /tmp.
func (s *Service) sandboxConfig() (sandbox.ProvisionerConfig, int64, error) {
	c := s.cfg.Sandbox
	pc := sandbox.ProvisionerConfig{SpoolDir: spoolDir(s.cfg), Logger: s.log}
	var err error
	parse := func(key string, e error) {
		if e != nil && err == nil {
			err = fmt.Errorf("server: sandbox.%s: %w", key, e)
		}
	}
	var e error
	pc.Defaults.CPUs, e = sandbox.ParseCPUs(c.CPUs)
	parse("cpus", e)
	pc.Defaults.MemoryBytes, e = sandbox.ParseMemory(c.Memory)
	parse("memory", e)
	pc.MaxCPUs, e = sandbox.ParseCPUs(c.MaxCPUs)
	parse("max_cpus", e)
	pc.MaxMemory, e = sandbox.ParseMemory(c.MaxMemory)
	parse("max_memory", e)
	tmp, e := sandbox.ParseMemory(c.TmpSize)
	parse("tmp_size", e)
	pc.Defaults.Pids = c.MaxProcesses
	return pc, tmp, err
}

// closeProvisioner releases what the provisioner still holds (the sandbox: its mounts and cgroups).
// Kernels must be shut down before.
func (s *Service) closeProvisioner() {
	if c, ok := s.kopts.Provisioner.(io.Closer); ok {
		if err := c.Close(); err != nil {
			s.log.Warn("provisioner: close", "err", err)
		}
	}
}

// claimKernel hands out a kernel for the session: a warm one from the pool, or, when the session's
// network setting differs from the pool's and the provisioner can tell them apart (a network
// namespace cannot be swapped under a running process), a new one started for it.
func (s *Service) claimKernel(ctx context.Context, doc carryover.Session) (*kernel.Kernel, error) {
	if doc.Sandbox.Network == s.kopts.Network || !kernel.IsolatesNetwork(s.kopts.Provisioner) {
		return s.pool.Get(ctx)
	}
	opts := s.kopts
	opts.Network = doc.Sandbox.Network
	k, err := kernel.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := s.installAgent(ctx, k); err != nil {
		_ = k.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	return k, nil
}

// attachKernel gives a claimed kernel the session's limits and workspace, and reports its limit hits
// as the session's events (prepareKernel calls it on every claim and context change; attaching again
// is a no-op).
func (s *Service) attachKernel(id string, k *kernel.Kernel, doc carryover.Session) error {
	p := k.Process()
	if err := p.SetLimits(kernel.Limits{CPUs: doc.Sandbox.CPUs, Memory: doc.Sandbox.Memory}); err != nil {
		return limitErr(err)
	}
	if err := p.AttachWorkspace(s.workspace(id)); err != nil {
		return err
	}
	p.OnLimit(func(hit kernel.LimitHit) { s.sandboxEvent(id, k, hit) })
	return nil
}

// limitErr turns a provisioner's rejection of a session's limits into the API's invalid error.
func limitErr(err error) error {
	var le *kernel.LimitError
	if errors.As(err, &le) {
		return carryover.Errorf(carryover.CodeInvalid, "sandbox.%s", le.Message).WithDetails("field", "sandbox."+le.Field)
	}
	return err
}

// sandboxEvent logs a limit hit and records it as a sandbox_limit_exceeded event of the session.
func (s *Service) sandboxEvent(id string, k *kernel.Kernel, hit kernel.LimitHit) {
	s.log.Warn("sandbox limit hit", "session", id, "kernel", k.ID(), "limit", hit.Kind, "limits", hit.Summary, "action", hit.Message)
	sandboxLimitHits.WithLabelValues(hit.Kind).Inc()
	ls, err := s.get(id)
	if err != nil {
		return // an ephemeral /api/execute session
	}
	payload := map[string]any{"sandbox_id": "sbx_" + k.ID(), "limit": hit.Kind, "message": hit.Message,
		"limits": map[string]any{"memory_bytes": hit.MemoryBytes, "cpus": hit.CPUs, "max_processes": hit.MaxProcesses}}
	s.emit(context.Background(), ls, "sandbox_limit_exceeded", payload)
}

var sandboxLimitHits = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "carryover_sandbox_limit_hits_total", Help: "Sandbox limit hits by limit (memory: OOM kills, pids: fork refusals).",
}, []string{"limit"})

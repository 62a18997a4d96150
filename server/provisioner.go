package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/kernel/sandbox"
	"github.com/carryover/carryover/kernel/template"
	"github.com/carryover/carryover/persistence"
)

// newProvisioner picks where kernels and exec commands run: kernel/sandbox's bubblewrap boxes when
// sandbox.enabled and they can run here, else plain local processes (loudly, when the sandbox was
// wanted). Bad limit values in the config are an error. shared, when set, holds the templates this
// server shares with the others of its process (Parts.Templates).
func newProvisioner(cfg *configs.Config, shared *template.Shared, log *slog.Logger) (kernel.Provisioner, error) {
	local := &kernel.LocalProvisioner{SpoolRoot: sessionConfig(cfg).Spool()}
	logHostCheck(context.Background(), cfg, log)
	if !cfg.Sandbox.Enabled {
		log.Warn("sandbox disabled (sandbox.enabled=false): kernels and exec commands run as plain processes with the server's privileges")
		return withTemplates(cfg, shared, local, log), nil
	}
	pc, tmp, err := sandboxConfig(cfg, log)
	if err != nil {
		return nil, err
	}
	c := cfg.Sandbox
	mgr, err := sandbox.New(sandbox.Config{
		Bwrap: c.Bwrap, StateDir: filepath.Join(cfg.DataDir, "kernels"), UIDBase: c.UIDBase, UIDCount: c.UIDCount,
		ROBinds: c.ROBinds, TmpSize: tmp, TmpInodes: c.TmpInodes, NoSeccomp: !c.Seccomp, Logger: log,
	})
	if err != nil {
		log.Error("SANDBOX UNAVAILABLE: kernels and exec commands run as PLAIN PROCESSES with the server's privileges; "+
			"any code run can read the database and every workspace. Fix the cause, or set sandbox.enabled=false to acknowledge.",
			"err", err)
		return withTemplates(cfg, shared, local, log), nil
	}
	// One err for both steps (a := in the if would shadow it and the mountability check would never
	// be looked at).
	err = os.MkdirAll(pc.SpoolDir, 0o700)
	if err == nil {
		err = mgr.CheckMountable(pc.SpoolDir)
	}
	if err != nil {
		_ = mgr.Close()
		log.Error("SANDBOX UNAVAILABLE: the checkpoint spool dir cannot be idmapped into sandboxes (set persistence.spool_dir "+
			"to a directory on the data dir's filesystem); kernels and exec commands run as PLAIN PROCESSES", "spool_dir", pc.SpoolDir, "err", err)
		return withTemplates(cfg, shared, local, log), nil
	}
	// A sandbox can leave set-uid files in its workspace (idmapped: they are root's on disk); nobody
	// but the server may reach them.
	_ = os.Chmod(filepath.Join(cfg.DataDir, "workspaces"), 0o700)
	info := mgr.Info()
	log.Info("sandbox: kernels and exec commands run under bubblewrap", "cgroup", info.Cgroup,
		"controllers", info.Controls, "idmapped", info.IDMapped, "seccomp", info.Seccomp, "defaults", pc.Defaults.String())
	python := cfg.Kernel.Python
	if python == "" {
		python = "/usr/bin/python3"
	}
	if _, err := kernel.ParseQuantity(c.MaxDisk); err != nil {
		_ = mgr.Close()
		return nil, fmt.Errorf("server: sandbox.max_disk: %w", err)
	}
	if size, err := kernel.ParseQuantity(c.Disk); err != nil {
		_ = mgr.Close()
		return nil, fmt.Errorf("server: sandbox.disk: %w", err)
	} else if size > 0 {
		if pc.Disks, err = sandbox.NewDisks(filepath.Join(cfg.DataDir, "disks"), size, c.DiskInodes); err != nil {
			log.Error("SANDBOX WEAKENED: workspaces have no disk quota", "err", err)
		}
	}
	pp, err := sandbox.FindPackagePaths(python, "/workspace/"+persistence.PackagesDir)
	if err != nil {
		log.Warn("sandbox: pip installs will not persist (no package prefix)", "err", err)
	} else {
		pc.Packages = &pp
	}
	pc.Forker = boxTemplates(cfg, shared, pc.KernelEnv(), log)
	pc.SpareBoxes = cfg.Pool.SpareBoxes
	return sandbox.NewProvisioner(mgr, pc), nil
}

// boxTemplates is kernel/template's fork server for sandboxed kernels when pool.templates is on:
// each kernel is forked from a warm template into its own box (kernel/sandbox/fork.go). nil: every
// sandboxed kernel starts cold.
func boxTemplates(cfg *configs.Config, shared *template.Shared, env map[string]string, log *slog.Logger) sandbox.Forker {
	if !cfg.Pool.Templates {
		return nil
	}
	tp := newTemplate(cfg, shared, env, &kernel.LocalProvisioner{}, log)
	if tp == nil {
		return nil
	}
	log.Info("kernel templates: sandboxed kernels are forked from a warm template into their boxes",
		"pre_import", cfg.Persistence.PreImport)
	return boxForker{tp}
}

// boxForker adapts a template.Provisioner to sandbox.Forker.
type boxForker struct{ *template.Provisioner }

func (f boxForker) Fork(ctx context.Context, spec kernel.LaunchSpec, env map[string]string, b sandbox.ForkBox) (int, <-chan struct{}, error) {
	tb := template.Box{Holder: b.Holder, Start: b.Start, Cgroups: b.Cgroups, Seccomp: b.Seccomp, UID: b.UID}
	tb.Entered, _ = b.Entered.(*template.Entered)
	return f.ForkBoxed(ctx, spec, env, tb)
}

// Enter makes it a sandbox.BoxEnterer: the spare boxes are entered ahead.
func (f boxForker) Enter(ctx context.Context, b sandbox.ForkBox) (any, error) {
	e, err := f.EnterBox(ctx, template.Box{Holder: b.Holder, Start: b.Start, Cgroups: b.Cgroups, Seccomp: b.Seccomp, UID: b.UID})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// withTemplates puts kernel/template's fork server in front of the local provisioner when
// pool.templates is on: unsandboxed kernels are forked from a warm, pre-imported template. Sandboxed
// kernels never are (each is started cold in its own box).
func withTemplates(cfg *configs.Config, shared *template.Shared, local *kernel.LocalProvisioner, log *slog.Logger) kernel.Provisioner {
	if !cfg.Pool.Templates {
		return local
	}
	tp := newTemplate(cfg, shared, nil, local, log)
	if tp == nil {
		return local
	}
	log.Info("kernel templates: unsandboxed kernels are forked from a warm template", "pre_import", cfg.Persistence.PreImport)
	return tp
}

// newTemplate starts the template (env: its environment at import, nil for a local kernel's), or
// joins shared's template of the same kernels; nil when it cannot (logged: kernels start cold).
func newTemplate(cfg *configs.Config, shared *template.Shared, env map[string]string, local *kernel.LocalProvisioner, log *slog.Logger) *template.Provisioner {
	python := cfg.Kernel.Python
	if python == "" {
		python = "/usr/bin/python3"
	}
	// Its script and log live in the data dir: a killed server leaves nothing in /tmp, and the next
	// start writes the script again and appends to the log.
	dir := filepath.Join(cfg.DataDir, "template")
	tc := template.Config{Python: python, PreImport: cfg.Persistence.PreImport, Local: local, Dir: dir,
		Preload: persistence.AgentPreload(), Env: env, Logger: log}
	var tp *template.Provisioner
	var err error
	if shared != nil {
		tp, err = shared.New(tc) // in a dir of the shared template's own
	} else if err = os.MkdirAll(dir, 0o700); err == nil {
		tp, err = template.New(tc)
	}
	if err != nil {
		log.Warn("kernel templates unavailable: kernels start cold", "err", err)
		return nil
	}
	return tp
}

// sandboxConfig parses the sandbox section's limits and ceilings, and the size of each box's /tmp.
func sandboxConfig(cfg *configs.Config, log *slog.Logger) (sandbox.ProvisionerConfig, int64, error) {
	c := cfg.Sandbox
	pc := sandbox.ProvisionerConfig{SpoolDir: sessionConfig(cfg).Spool(), Logger: log}
	var err error
	parse := func(key string, e error) {
		if e != nil && err == nil {
			err = fmt.Errorf("server: sandbox.%s: %w", key, e)
		}
	}
	var e error
	pc.Defaults.CPUs, e = kernel.ParseCPUs(c.CPUs)
	parse("cpus", e)
	pc.Defaults.MemoryBytes, e = kernel.ParseMemory(c.Memory)
	parse("memory", e)
	pc.MaxCPUs, e = kernel.ParseCPUs(c.MaxCPUs)
	parse("max_cpus", e)
	pc.MaxMemory, e = kernel.ParseMemory(c.MaxMemory)
	parse("max_memory", e)
	tmp, e := kernel.ParseMemory(c.TmpSize)
	parse("tmp_size", e)
	pc.Defaults.Pids = c.MaxProcesses
	return pc, tmp, err
}

// closeProvisioner releases what the provisioner still holds (the sandbox: its mounts and
// cgroups). Every kernel must be shut down before.
func closeProvisioner(p kernel.Provisioner, log *slog.Logger) {
	if c, ok := p.(io.Closer); ok {
		if err := c.Close(); err != nil {
			log.Warn("provisioner: close", "err", err)
		}
	}
}

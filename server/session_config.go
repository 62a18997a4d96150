package server

import (
	"time"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session"
)

// sessionConfig is the part of cfg the session service reads, as the plain values it takes: the
// service never sees the config loader.
func sessionConfig(cfg *configs.Config) session.Config {
	return session.Config{
		DataDir:  cfg.DataDir,
		SpoolDir: cfg.Persistence.SpoolDir,
		NodeID:   cfg.ClusterNodeID(),

		Python:            cfg.Kernel.Python,
		Transport:         cfg.Kernel.Transport,
		StartupTimeout:    configs.Seconds(cfg.Kernel.StartupTimeoutSeconds),
		HeartbeatInterval: time.Duration(cfg.Kernel.HeartbeatIntervalMS) * time.Millisecond,
		ShutdownGrace:     configs.Seconds(cfg.Kernel.ShutdownGraceSeconds),
		PoolSize:          cfg.Pool.Size,

		DefaultRunTimeout:    configs.Seconds(cfg.Run.DefaultTimeoutSeconds),
		MaxRunTimeoutSeconds: cfg.Run.MaxTimeoutSeconds,
		MaxOutputBytes:       cfg.Run.MaxOutputBytes,

		Network:               cfg.Sandbox.Network,
		SandboxTimeoutSeconds: cfg.Sandbox.TimeoutSeconds,
		MaxDisk:               cfg.Sandbox.MaxDisk,

		ChunkSize: cfg.Persistence.ChunkSize,
		Retention: cfg.Persistence.Retention,
		PreImport: cfg.Persistence.PreImport,
		Replay: persistence.ReplayOptions{Off: !cfg.Persistence.Replay,
			Budget: configs.Seconds(cfg.Persistence.ReplayBudgetSeconds)},
		SaveHiddenFiles:   cfg.Persistence.SaveHiddenFiles,
		MaxFileBytes:      cfg.Persistence.MaxFileBytes,
		MaxWorkspaceBytes: cfg.Persistence.MaxWorkspaceBytes,

		CullIdle:     configs.Seconds(cfg.Cull.IdleSeconds),
		CullInterval: configs.Seconds(cfg.Cull.IntervalSeconds),

		CPUSecondCents: cfg.Cost.CPUSecondCents,
		GiBHourCents:   cfg.Cost.GiBHourCents,
	}
}

package server

import (
	"strings"
	"time"

	"github.com/carryover/carryover"
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
		PoolMaxSize:       cfg.Pool.MaxSize,
		PoolParallel:      cfg.Pool.ParallelStarts,
		PoolShrinkAfter:   configs.Seconds(cfg.Pool.ShrinkAfterSeconds),

		DefaultRunTimeout:    configs.Seconds(cfg.Run.DefaultTimeoutSeconds),
		MaxRunTimeoutSeconds: cfg.Run.MaxTimeoutSeconds,
		MaxOutputBytes:       cfg.Run.MaxOutputBytes,
		IdempotencyTTL:       configs.Seconds(cfg.Run.IdempotencyTTLHours * 3600),

		Network:               cfg.Sandbox.Network,
		SandboxTimeoutSeconds: cfg.Sandbox.TimeoutSeconds,
		MaxDisk:               cfg.Sandbox.MaxDisk,

		ChunkSize: cfg.Persistence.ChunkSize,
		Retention: cfg.Persistence.Retention,
		PreImport: cfg.Persistence.PreImport,
		Replay: persistence.ReplayOptions{Off: !cfg.Persistence.Replay,
			Budget: configs.Seconds(cfg.Persistence.ReplayBudgetSeconds)},
		LazyRestore:       cfg.Persistence.LazyRestore,
		SharedBuffers:     cfg.Persistence.SharedBuffers,
		SaveHiddenFiles:   cfg.Persistence.SaveHiddenFiles,
		SyncFiles:         !(cfg.Store.Driver == "sqlite" && strings.EqualFold(cfg.Store.SQLiteSynchronous, "normal")),
		MaxFileBytes:      cfg.Persistence.MaxFileBytes,
		MaxWorkspaceBytes: cfg.Persistence.MaxWorkspaceBytes,

		CullIdle:     configs.Seconds(cfg.Cull.IdleSeconds),
		CullInterval: configs.Seconds(cfg.Cull.IntervalSeconds),

		MaxLiveKernels: cfg.Capacity.MaxLiveKernels,
		MemoryBudget:   cfg.Capacity.MemoryBudgetBytes,
		MemoryReserve:  cfg.Capacity.ReserveBytes,
		KernelBytes:    cfg.Capacity.KernelBytes,
		ForkedKernels:  cfg.Pool.Templates,
		QueueWait:      configs.Seconds(cfg.Capacity.QueueSeconds),
		QueueMax:       cfg.Capacity.QueueMax,
		PSIThreshold:   cfg.Capacity.PSIThreshold,

		CPUSecondCents: cfg.Cost.CPUSecondCents,
		GiBHourCents:   cfg.Cost.GiBHourCents,

		Quotas: quotas(cfg),
	}
}

// quotas is each tenant's quotas: the quotas section with what tenants.<name>.quotas replaces.
func quotas(cfg *configs.Config) func(tenant string) carryover.Quotas {
	return func(tenant string) carryover.Quotas {
		q := cfg.QuotasOf(tenant)
		return carryover.Quotas{Sessions: q.Sessions, LiveKernels: q.LiveKernels, StoredBytes: q.StoredBytes,
			CPUSeconds: q.CPUSeconds, CPUPeriod: configs.Seconds(q.CPUPeriodSeconds)}
	}
}

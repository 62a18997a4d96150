package session

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/kernels"
	"golang.org/x/sys/unix"

	"github.com/carryover/carryover"
)

// Config is what the session service needs of the server's configuration, as plain values. The
// assembly (server/) fills it from configs.Config, so this package never reads the config loader and
// a unit test writes one by hand. Zero durations and sizes mean what the field says (no default is
// applied here: the documented defaults live in configs/carryover.yaml).
type Config struct {
	DataDir  string // data_dir: workspaces/, kernels/, disks/ and skills-cache/ live under it
	SpoolDir string // persistence.spool_dir as configured; "" picks one (Spool)
	NodeID   string // this node's id in a cluster (configs.Config.ClusterNodeID); "" on a single node

	Python            string        // kernel.python: the interpreter the kernelspec is pointed at
	Transport         string        // kernel.transport: "ipc" or "tcp"
	StartupTimeout    time.Duration // kernel.startup_timeout_seconds
	HeartbeatInterval time.Duration // kernel.heartbeat_interval_ms
	ShutdownGrace     time.Duration // kernel.shutdown_grace_seconds
	PoolSize          int           // pool.size: warm kernels kept waiting (0: none, each claim starts one)
	PoolMaxSize       int           // pool.max_size: what the pool may grow to under a burst of claims
	PoolParallel      int           // pool.parallel_starts: kernels started at once (0: the CPUs usable)
	PoolShrinkAfter   time.Duration // pool.shrink_after_seconds: no claim this long, back to pool.size

	DefaultRunTimeout    time.Duration // run.default_timeout_seconds
	MaxRunTimeoutSeconds float64       // run.max_timeout_seconds: the largest timeout_seconds accepted
	MaxOutputBytes       int64         // run.max_output_bytes: what an answer keeps of a run's output
	IdempotencyTTL       time.Duration // run.idempotency_ttl_hours: how long a run's idempotency key binds (0: 24 h)

	Network               bool    // sandbox.network: a new session's (and the pool's) network setting
	SandboxTimeoutSeconds float64 // sandbox.timeout_seconds: a new session's rotation timeout
	MaxDisk               string  // sandbox.max_disk: the largest sandbox.disk a session may ask for

	ChunkSize         int                       // persistence.chunk_size
	Retention         int                       // persistence.retention: checkpoints kept per session
	PreImport         []string                  // persistence.pre_import: modules the pool's kernels import
	Replay            persistence.ReplayOptions // persistence.replay, replay_budget_seconds
	LazyRestore       bool                      // persistence.lazy_restore
	SharedBuffers     bool                      // persistence.shared_buffers
	SaveHiddenFiles   bool                      // persistence.save_hidden_files
	MaxFileBytes      int64                     // persistence.max_file_bytes
	MaxWorkspaceBytes int64                     // persistence.max_workspace_bytes

	// SyncFiles: a turn's changed workspace files are synced before its checkpoint commits (not with
	// store.sqlite_synchronous normal, whose answers do not promise a power cut's survival anyway).
	SyncFiles bool

	CullIdle     time.Duration // cull.idle_seconds: hibernate a session idle this long (0: never)
	CullInterval time.Duration // cull.interval_seconds: how often to look

	// The node's capacity (docs/capacity.md). Zero MaxLiveKernels and MemoryBudget are derived from
	// the host (resolveBudget); MaxLiveKernels < 0 is no limit.
	MaxLiveKernels int           // capacity.max_live_kernels
	MemoryBudget   int64         // capacity.memory_budget_bytes: what kernels may hold together
	MemoryReserve  int64         // capacity.reserve_bytes: host memory kept free of kernels
	KernelBytes    int64         // capacity.kernel_bytes: a live kernel's estimate (0: by ForkedKernels)
	ForkedKernels  bool          // pool.templates: kernels are forked from templates (smaller estimate)
	QueueWait      time.Duration // capacity.queue_seconds: a claim waits this long for a slot, then 429
	QueueMax       int           // capacity.queue_max: claims waiting at most; more are refused at once
	PSIThreshold   float64       // capacity.psi_threshold: PSI memory full avg10 (%) that hibernates (0: off)

	CPUSecondCents float64 // cost.cpu_second_cents
	GiBHourCents   float64 // cost.gib_hour_cents

	Quotas func(tenant string) carryover.Quotas // quotas and tenants.<name>.quotas; nil: none (quota.go)
}

// Spool is where kernels and the server exchange checkpoint data: the configured dir, else tmpfs when
// possible, because the bytes are read back at once and deleted (on disk, dirty-page writeback
// doubled restore time), else the data dir's spool/.
func (c Config) Spool() string {
	if c.SpoolDir != "" {
		return c.SpoolDir
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && unix.Access("/dev/shm", unix.W_OK) == nil {
		sum := sha256.Sum256([]byte(c.DataDir))
		return filepath.Join("/dev/shm", "carryover-spool-"+hex.EncodeToString(sum[:6]))
	}
	return filepath.Join(c.DataDir, "spool")
}

// kernelsConfig is what package kernels needs of c.
func (c Config) kernelsConfig() kernels.Config {
	return kernels.Config{DataDir: c.DataDir, Spool: c.Spool(), Network: c.Network, PreImport: c.PreImport,
		MaxDisk: c.MaxDisk, MaxOutputBytes: c.MaxOutputBytes}
}

// workspacesDir holds one directory per session: its /workspace.
func (c Config) workspacesDir() string { return filepath.Join(c.DataDir, "workspaces") }

// PrepareDirs clears the spool of a previous run of the server (its kernels are gone, so is their
// use for those files) and makes the data dir's workspaces, spool and kernels dirs. The assembly
// calls it first, before it makes a provisioner (which checks the spool can be mounted).
func PrepareDirs(c Config) error {
	if c.SpoolDir == "" {
		_ = os.RemoveAll(c.Spool())
	}
	return makeDirs(c)
}

// makeDirs makes the data dir's workspaces, spool and kernels dirs where missing.
func makeDirs(c Config) error {
	for _, d := range []string{c.workspacesDir(), c.Spool(), filepath.Join(c.DataDir, "kernels")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	return nil
}

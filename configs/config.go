// Package configs holds carryover's configuration: the documented default file
// (carryover.yaml, embedded so the defaults and their docs cannot drift apart)
// and the viper loader that layers a user file, CARRYOVER_* env vars and flags on top.
package configs

import (
	"bytes"
	_ "embed"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

//go:embed carryover.yaml
var defaultYAML []byte

// DefaultYAML returns the documented default configuration file.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Config is the whole configuration, one field per documented key.
type Config struct {
	Server struct {
		Addr                 string   `mapstructure:"addr"`
		MaxBodyBytes         int64    `mapstructure:"max_body_bytes"`
		AllowedOrigins       []string `mapstructure:"allowed_origins"`
		ShutdownGraceSeconds int      `mapstructure:"shutdown_grace_seconds"`
		WebDir               string   `mapstructure:"web_dir"`
		MaxImportBytes       int64    `mapstructure:"max_import_bytes"`
	} `mapstructure:"server"`
	Auth struct {
		Token     string            `mapstructure:"token"`
		Tenants   map[string]string `mapstructure:"tenants"`
		RateLimit RateLimitConfig   `mapstructure:"rate_limit"`
	} `mapstructure:"auth"`
	Quotas  QuotaConfig             `mapstructure:"quotas"`  // every tenant's (tenants.go)
	Tenants map[string]TenantConfig `mapstructure:"tenants"` // one tenant's own settings (tenants.go)
	DataDir string                  `mapstructure:"data_dir"`
	Kernel  KernelConfig            `mapstructure:"kernel"`
	Pool    struct {
		Size               int     `mapstructure:"size"`
		MaxSize            int     `mapstructure:"max_size"`
		ParallelStarts     int     `mapstructure:"parallel_starts"`
		ShrinkAfterSeconds float64 `mapstructure:"shrink_after_seconds"`
		// Templates forks unsandboxed kernels from a warm, pre-imported template (kernel/template).
		Templates bool `mapstructure:"templates"`
		// SpareBoxes is how many sandbox boxes are kept ready for forked kernels (kernel/sandbox/spare.go).
		SpareBoxes int `mapstructure:"spare_boxes"`
	} `mapstructure:"pool"`
	Capacity CapacityConfig `mapstructure:"capacity"`
	Run      struct {
		DefaultTimeoutSeconds float64 `mapstructure:"default_timeout_seconds"`
		MaxTimeoutSeconds     float64 `mapstructure:"max_timeout_seconds"`
		MaxOutputBytes        int64   `mapstructure:"max_output_bytes"`
		IdempotencyTTLHours   float64 `mapstructure:"idempotency_ttl_hours"`
	} `mapstructure:"run"`
	Persistence struct {
		ChunkSize         int      `mapstructure:"chunk_size"`
		Retention         int      `mapstructure:"retention"`
		SaveHiddenFiles   bool     `mapstructure:"save_hidden_files"`
		MaxFileBytes      int64    `mapstructure:"max_file_bytes"`
		MaxWorkspaceBytes int64    `mapstructure:"max_workspace_bytes"`
		SpoolDir          string   `mapstructure:"spool_dir"`
		PreImport         []string `mapstructure:"pre_import"`
		// Replay rebuilds on restore what a checkpoint could not save by replaying the turns that
		// made it, within ReplayBudgetSeconds of their recorded time per restore.
		Replay              bool    `mapstructure:"replay"`
		ReplayBudgetSeconds float64 `mapstructure:"replay_budget_seconds"`
		// LazyRestore lets a wake map large buffers at once and fill them in the background
		// (docs/persistence.md#lazy-restore); off, every buffer is read before the run starts.
		LazyRestore bool `mapstructure:"lazy_restore"`
		// SharedBuffers restores the large buffers of a fork's children (and any another kernel
		// maps already) copy-on-write from one node-wide copy (docs/persistence.md#shared-buffers);
		// off, each kernel holds its own copy.
		SharedBuffers bool `mapstructure:"shared_buffers"`
	} `mapstructure:"persistence"`
	Cull struct {
		IdleSeconds     float64 `mapstructure:"idle_seconds"`
		IntervalSeconds float64 `mapstructure:"interval_seconds"`
	} `mapstructure:"cull"`
	Sandbox SandboxConfig `mapstructure:"sandbox"`
	Cost    struct {
		CPUSecondCents float64 `mapstructure:"cpu_second_cents"`
		GiBHourCents   float64 `mapstructure:"gib_hour_cents"`
	} `mapstructure:"cost"`
	Store   StoreConfig   `mapstructure:"store"`
	Chunks  ChunksConfig  `mapstructure:"chunks"`
	Cluster ClusterConfig `mapstructure:"cluster"`
	Jupyter struct {
		RestartRestores bool `mapstructure:"restart_restores"`
	} `mapstructure:"jupyter"`
	Backup BackupConfig `mapstructure:"backup"`
}

// SandboxConfig is the sandbox section: bubblewrap boxes, their limits and disks (kernel/sandbox).
type SandboxConfig struct {
	Enabled        bool     `mapstructure:"enabled"`
	TimeoutSeconds float64  `mapstructure:"timeout_seconds"`
	Network        bool     `mapstructure:"network"`
	CPUs           string   `mapstructure:"cpus"`
	Memory         string   `mapstructure:"memory"`
	MaxCPUs        string   `mapstructure:"max_cpus"`
	MaxMemory      string   `mapstructure:"max_memory"`
	MaxProcesses   int      `mapstructure:"max_processes"`
	TmpSize        string   `mapstructure:"tmp_size"`
	TmpInodes      int      `mapstructure:"tmp_inodes"`
	UIDBase        int      `mapstructure:"uid_base"`
	UIDCount       int      `mapstructure:"uid_count"`
	Bwrap          string   `mapstructure:"bwrap"`
	ROBinds        []string `mapstructure:"ro_binds"`
	Seccomp        bool     `mapstructure:"seccomp"`
	Disk           string   `mapstructure:"disk"`
	DiskInodes     int      `mapstructure:"disk_inodes"`
	MaxDisk        string   `mapstructure:"max_disk"`
}

// BackupConfig replicates the SQLite store to a directory or an S3 bucket (persistence/backup).
type BackupConfig struct {
	To              string  `mapstructure:"to"`
	IntervalSeconds float64 `mapstructure:"interval_seconds"`
	RetentionHours  float64 `mapstructure:"retention_hours"`
	S3              struct {
		Endpoint  string `mapstructure:"endpoint"`
		Region    string `mapstructure:"region"`
		AccessKey string `mapstructure:"access_key"`
		SecretKey string `mapstructure:"secret_key"`
		PathStyle bool   `mapstructure:"path_style"`
	} `mapstructure:"s3"`
}

// ClusterConfig makes a node of a cluster (store.driver postgres): its identity, the address other
// nodes proxy to, its heartbeat, and the token of node-to-node hops.
type ClusterConfig struct {
	NodeID           string  `mapstructure:"node_id"`
	AdvertiseAddr    string  `mapstructure:"advertise_addr"`
	HeartbeatSeconds float64 `mapstructure:"heartbeat_seconds"`
	TTLSeconds       float64 `mapstructure:"ttl_seconds"`
	Token            string  `mapstructure:"token"`
	// TestMaxFormat is a test hook: the checkpoint format this node announces as its newest (0: the
	// binary's own), to stand for an older or newer build in a rolling upgrade.
	TestMaxFormat int `mapstructure:"test_max_format"`
}

// ChunksConfig puts large checkpoint chunks in an S3-compatible object store (store.driver postgres
// only: the catalog stays in PostgreSQL). No bucket: every chunk stays in the database.
type ChunksConfig struct {
	InlineMaxBytes int   `mapstructure:"inline_max_bytes"`
	CacheMaxBytes  int64 `mapstructure:"cache_max_bytes"`
	PackMaxBytes   int   `mapstructure:"pack_max_bytes"`
	S3             struct {
		Endpoint  string `mapstructure:"endpoint"`
		Bucket    string `mapstructure:"bucket"`
		Region    string `mapstructure:"region"`
		AccessKey string `mapstructure:"access_key"`
		SecretKey string `mapstructure:"secret_key"`
		PathStyle bool   `mapstructure:"path_style"`
	} `mapstructure:"s3"`
}

// StoreConfig picks the database: the embedded SQLite file under data_dir, or PostgreSQL for a cluster.
type StoreConfig struct {
	Driver string `mapstructure:"driver"` // "sqlite" | "postgres"
	DSN    string `mapstructure:"dsn"`    // postgres only
	// SQLiteSynchronous is what a SQLite commit waits for: "full" (an answered turn is on disk and
	// survives a power cut) or "normal" (an fsync only at WAL checkpoints; a power cut loses answered
	// turns, docs/chaos.md). sqlite only.
	SQLiteSynchronous string `mapstructure:"sqlite_synchronous"`
}

// KernelConfig is the part of the configuration the kernel package needs.
type KernelConfig struct {
	Python                string  `mapstructure:"python"`
	Transport             string  `mapstructure:"transport"`
	StartupTimeoutSeconds float64 `mapstructure:"startup_timeout_seconds"`
	ShutdownGraceSeconds  float64 `mapstructure:"shutdown_grace_seconds"`
	HeartbeatIntervalMS   int     `mapstructure:"heartbeat_interval_ms"`
}

// Seconds converts a float number of seconds from the config into a Duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// New returns a viper instance preloaded with the embedded defaults and wired to
// CARRYOVER_* environment variables. Flags, if given, are bound by their key names.
func New(flags *pflag.FlagSet) (*viper.Viper, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(defaultYAML)); err != nil {
		return nil, fmt.Errorf("configs: embedded defaults: %w", err)
	}
	v.SetEnvPrefix("CARRYOVER")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if flags != nil {
		if err := v.BindPFlags(flags); err != nil {
			return nil, fmt.Errorf("configs: flags: %w", err)
		}
	}
	return v, nil
}

// Load builds the Config: defaults, then the optional file, then env, then flags.
func Load(file string, flags *pflag.FlagSet) (*Config, error) {
	v, err := New(flags)
	if err != nil {
		return nil, err
	}
	if file != "" {
		v.SetConfigFile(file)
		if err := v.MergeInConfig(); err != nil {
			return nil, fmt.Errorf("configs: reading %s: %w", file, err)
		}
	}
	var c Config
	if err := v.Unmarshal(&c); err != nil {
		return nil, fmt.Errorf("configs: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	return &c, nil
}

// Default returns the built-in defaults (used by tests and benchmarks).
func Default() *Config {
	c, err := Load("", nil)
	if err != nil {
		panic(err) // the embedded file is part of the binary; a failure is a build bug
	}
	return c
}

// Validate rejects values that would only fail later and more obscurely.
func (c *Config) Validate() error {
	switch {
	case c.Kernel.Transport != "ipc" && c.Kernel.Transport != "tcp":
		return fmt.Errorf("configs: kernel.transport must be ipc or tcp, got %q", c.Kernel.Transport)
	case c.Pool.Size < 0:
		return fmt.Errorf("configs: pool.size must be >= 0")
	case c.Pool.MaxSize < 0 || c.Pool.ParallelStarts < 0 || c.Pool.ShrinkAfterSeconds < 0 || c.Pool.SpareBoxes < 0:
		return fmt.Errorf("configs: pool.max_size, pool.parallel_starts, pool.shrink_after_seconds and pool.spare_boxes must be >= 0")
	case c.Persistence.ChunkSize < 4096 || c.Persistence.ChunkSize > 64<<20:
		return fmt.Errorf("configs: persistence.chunk_size must be between 4 KiB and 64 MiB")
	case c.Persistence.ReplayBudgetSeconds < 0:
		return fmt.Errorf("configs: persistence.replay_budget_seconds must be >= 0")
	case c.Persistence.Retention < 1:
		return fmt.Errorf("configs: persistence.retention must be >= 1")
	case c.Server.MaxBodyBytes <= 0:
		return fmt.Errorf("configs: server.max_body_bytes must be > 0")
	case c.Server.MaxImportBytes <= 0:
		return fmt.Errorf("configs: server.max_import_bytes must be > 0")
	case c.DataDir == "":
		return fmt.Errorf("configs: data_dir must not be empty")
	case c.Store.Driver != "sqlite" && c.Store.Driver != "postgres":
		return fmt.Errorf("configs: store.driver must be sqlite or postgres, got %q", c.Store.Driver)
	case !slices.Contains([]string{"", "full", "normal"}, strings.ToLower(c.Store.SQLiteSynchronous)):
		return fmt.Errorf("configs: store.sqlite_synchronous must be full or normal, got %q", c.Store.SQLiteSynchronous)
	case c.Store.Driver == "postgres" && c.Store.DSN == "":
		return fmt.Errorf("configs: store.dsn must name the PostgreSQL database when store.driver is postgres")
	case c.Chunks.S3.Bucket != "" && c.Store.Driver != "postgres":
		return fmt.Errorf("configs: chunks.s3 needs store.driver postgres (the chunk catalog lives there)")
	case c.Store.Driver == "postgres" && (c.Cluster.HeartbeatSeconds <= 0 || c.Cluster.TTLSeconds < 2*c.Cluster.HeartbeatSeconds):
		return fmt.Errorf("configs: cluster.ttl_seconds must be at least twice cluster.heartbeat_seconds (> 0)")
	case c.Chunks.InlineMaxBytes < 1:
		return fmt.Errorf("configs: chunks.inline_max_bytes must be > 0")
	case c.Backup.To != "" && c.Store.Driver != "sqlite":
		return fmt.Errorf("configs: backup.to replicates the SQLite store; with store.driver postgres back up PostgreSQL itself (docs/operations.md)")
	case c.Backup.To != "" && c.Backup.IntervalSeconds <= 0:
		return fmt.Errorf("configs: backup.interval_seconds must be > 0")
	case c.Chunks.CacheMaxBytes < 0:
		return fmt.Errorf("configs: chunks.cache_max_bytes must be >= 0 (0: no cache)")
	case c.Chunks.PackMaxBytes < 0:
		return fmt.Errorf("configs: chunks.pack_max_bytes must be >= 0 (0: each chunk its own object)")
	}
	if err := c.Capacity.validate(); err != nil {
		return err
	}
	seen := map[string]string{}
	for name, tok := range c.Auth.Tenants {
		if name == "" || tok == "" {
			return fmt.Errorf("configs: auth.tenants: tenant names and tokens must not be empty")
		}
		if other, ok := seen[tok]; ok || (c.Auth.Token != "" && tok == c.Auth.Token) {
			return fmt.Errorf("configs: auth.tenants: %s shares its token with %q", name, other)
		}
		seen[tok] = name
	}
	return c.validateTenants()
}

package capacity

import "syscall"

// Budget is the node's capacity as resolved at start: the configured values, or what the host's
// memory allows (docs/capacity.md, "How the defaults are derived").
type Budget struct {
	Memory      int64  // bytes the kernels may hold together (capacity.memory_budget_bytes); <= 0: none
	KernelBytes int64  // a live kernel's estimate (capacity.kernel_bytes)
	MaxLive     int    // capacity.max_live_kernels; <= 0: unlimited
	Source      string // "config" or "derived" (from the memory budget): where MaxLive came from
}

// BudgetConfig is what the configuration says of the node's capacity.
type BudgetConfig struct {
	MaxLiveKernels int   // 0: derived; < 0: no limit
	MemoryBudget   int64 // 0: derived
	MemoryReserve  int64
	KernelBytes    int64 // 0: DefaultKernelBytes, or DefaultForkedKernelBytes when Forked
	Forked         bool  // kernels are forked from templates (pool.templates)
	OpenFiles      int64 // the server's open-file limit (RLIMIT_NOFILE); 0: not known
	PoolSize       int   // the warm pool's size and largest size: its kernels live too
	PoolMaxSize    int
}

// DefaultKernelBytes is a live session with numpy and pandas imported (~113 MiB measured) plus room.
const DefaultKernelBytes = 150 << 20

// DefaultForkedKernelBytes is the same session forked from a template: what its box is charged for
// (~22 MiB measured: the template's pages it maps are not its own) plus room. The memory watch
// counts what each kernel really holds; this only sizes the derived max_live_kernels.
const DefaultForkedKernelBytes = 48 << 20

// FilesPerKernel is what a live kernel holds open in the server, with room: ~11.6 measured with
// the sandbox (its five ZMQ connections, pidfds, its box's cgroup event files, uid lock, user
// namespace).
const FilesPerKernel = 16

// filesReserve is the server's own open files (store, listeners, clients), kept from the kernels.
const filesReserve = 1024

// ResolveBudget derives what the config leaves at 0 from the host's room (MemAvailable, or the
// cgroup's room when smaller): the memory budget is that room minus the reserve, and
// max_live_kernels is the budget divided by kernel_bytes, less the warm pool's largest size, at
// least 1, and no more than the open-file limit leaves room for (FilesPerKernel each, beyond
// filesReserve): past it the server's own files (the store's among them) would fail with EMFILE.
// max_live_kernels < 0 means no limit.
func ResolveBudget(c BudgetConfig, hostRoom int64) Budget {
	b := Budget{Memory: c.MemoryBudget, KernelBytes: c.KernelBytes, MaxLive: c.MaxLiveKernels, Source: "config"}
	switch {
	case b.KernelBytes > 0:
	case c.Forked:
		b.KernelBytes = DefaultForkedKernelBytes
	default:
		b.KernelBytes = DefaultKernelBytes
	}
	if b.Memory == 0 && hostRoom > 0 {
		b.Memory = max(hostRoom-c.MemoryReserve, b.KernelBytes)
	}
	switch {
	case b.MaxLive < 0:
		b.MaxLive = 0 // unlimited
	case b.MaxLive == 0 && b.Memory > 0:
		pool := max(c.PoolMaxSize, c.PoolSize)
		b.MaxLive = max(int(b.Memory/b.KernelBytes)-pool, 1)
		if c.OpenFiles > 0 {
			b.MaxLive = min(b.MaxLive, max(int((c.OpenFiles-filesReserve)/FilesPerKernel)-pool, 1))
		}
		b.Source = "derived"
	}
	return b
}

// OpenFileLimit is this process's open-file limit (RLIMIT_NOFILE's soft value, which the Go runtime
// raises to the hard one at start); 0 when it cannot be read or is unlimited.
func OpenFileLimit() int64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil || rl.Cur == ^uint64(0) || rl.Cur > 1<<40 {
		return 0
	}
	return int64(rl.Cur)
}

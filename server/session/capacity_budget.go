package session

// capacityBudget is the node's capacity as resolved at start: the configured values, or what the
// host's memory allows (docs/capacity.md, "How the defaults are derived").
type capacityBudget struct {
	memory      int64  // bytes the kernels may hold together (capacity.memory_budget_bytes); <= 0: none
	kernelBytes int64  // a live kernel's estimate (capacity.kernel_bytes)
	maxLive     int    // capacity.max_live_kernels; <= 0: unlimited
	source      string // "config" or "derived" (from the memory budget): where maxLive came from
}

// defaultKernelBytes is a live session with numpy and pandas imported (~113 MiB measured) plus room.
const defaultKernelBytes = 150 << 20

// resolveBudget derives what the config leaves at 0 from the host's room (MemAvailable, or the
// cgroup's room when smaller): the memory budget is that room minus capacity.reserve_bytes, and
// max_live_kernels is the budget divided by capacity.kernel_bytes, less the warm pool's largest
// size (its kernels live too), at least 1. max_live_kernels < 0 means no limit.
func resolveBudget(c Config, hostRoom int64) capacityBudget {
	b := capacityBudget{memory: c.MemoryBudget, kernelBytes: c.KernelBytes, maxLive: c.MaxLiveKernels, source: "config"}
	if b.kernelBytes <= 0 {
		b.kernelBytes = defaultKernelBytes
	}
	if b.memory == 0 && hostRoom > 0 {
		b.memory = max(hostRoom-c.MemoryReserve, b.kernelBytes)
	}
	switch {
	case b.maxLive < 0:
		b.maxLive = 0 // unlimited
	case b.maxLive == 0 && b.memory > 0:
		b.maxLive = max(int(b.memory/b.kernelBytes)-max(c.PoolMaxSize, c.PoolSize), 1)
		b.source = "derived"
	}
	return b
}

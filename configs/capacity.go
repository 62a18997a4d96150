package configs

import "fmt"

// CapacityConfig bounds what a node takes on (docs/capacity.md): its live kernels, the memory they
// may hold, and how long a claim waits for a slot before a 429.
type CapacityConfig struct {
	MaxLiveKernels    int     `mapstructure:"max_live_kernels"`
	MemoryBudgetBytes int64   `mapstructure:"memory_budget_bytes"`
	ReserveBytes      int64   `mapstructure:"reserve_bytes"`
	KernelBytes       int64   `mapstructure:"kernel_bytes"`
	QueueSeconds      float64 `mapstructure:"queue_seconds"`
	QueueMax          int     `mapstructure:"queue_max"`
	PSIThreshold      float64 `mapstructure:"psi_threshold"`
}

func (c CapacityConfig) validate() error {
	switch {
	case c.MaxLiveKernels < -1:
		return fmt.Errorf("configs: capacity.max_live_kernels must be >= -1 (-1: no limit, 0: derived from memory)")
	case c.MemoryBudgetBytes < 0 || c.ReserveBytes < 0 || c.KernelBytes < 0:
		return fmt.Errorf("configs: capacity.memory_budget_bytes, reserve_bytes and kernel_bytes must be >= 0")
	case c.QueueSeconds < 0:
		return fmt.Errorf("configs: capacity.queue_seconds must be >= 0")
	case c.QueueMax < 1:
		return fmt.Errorf("configs: capacity.queue_max must be >= 1")
	case c.PSIThreshold < 0 || c.PSIThreshold > 100:
		return fmt.Errorf("configs: capacity.psi_threshold must be between 0 (off) and 100")
	}
	return nil
}

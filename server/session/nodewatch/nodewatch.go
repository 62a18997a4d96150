// Package nodewatch is the node's watch as the status endpoint and the metrics show it: its
// capacity as resolved at start, its memory as last read, its hibernations by reason; and the shape
// of GET /api/status.
package nodewatch

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/capacity"
)

// NodeStatus is GET /api/status: what this node holds and can take (docs/api.md, docs/capacity.md).
type NodeStatus struct {
	NodeID   string         `json:"node_id,omitempty"`
	Capacity CapacityStatus `json:"capacity"`
	Sessions SessionCounts  `json:"sessions"`
	Memory   MemoryStatus   `json:"memory"`
	Pool     PoolStatus     `json:"pool"`
	// Templates are the warm templates kernels are forked from (pool.templates), absent when
	// kernels are not forked here.
	Templates *kernel.TemplateStats `json:"templates,omitempty"`
	Evictions map[string]int64      `json:"evictions"` // hibernations since start, by reason
	Refusals  map[string]int64      `json:"refusals"`  // 429 capacity answers since start, by reason
}

// CapacityStatus is the node's live-kernel capacity.
type CapacityStatus struct {
	MaxLiveKernels    int     `json:"max_live_kernels"` // 0: no limit
	Source            string  `json:"source"`           // config | derived (from the memory budget)
	LiveKernels       int     `json:"live_kernels"`     // slots held: session kernels, ephemeral runs
	Queued            int     `json:"queued"`           // claims waiting for a slot now
	QueuedTotal       int64   `json:"queued_total"`     // claims that had to wait, since start
	QueueSeconds      float64 `json:"queue_seconds"`
	MemoryBudgetBytes int64   `json:"memory_budget_bytes"`
	KernelBytes       int64   `json:"kernel_bytes"`
}

// SessionCounts counts this node's sessions.
type SessionCounts struct {
	Total      int `json:"total"`
	Live       int `json:"live"`       // holding a kernel
	Hibernated int `json:"hibernated"` // running, without a kernel (it wakes on its next turn)
	Busy       int `json:"busy"`       // running a turn (or a turn queued on its run lock)
}

// MemoryStatus is the last memory reading of the pressure watch.
type MemoryStatus struct {
	KernelBytes    int64   `json:"kernel_bytes"`    // what the live kernels cost at their last samples (a shared buffer copy once)
	AvailableBytes int64   `json:"available_bytes"` // the host's (or cgroup's) room; -1: unknown
	PSIFullAvg10   float64 `json:"psi_full_avg10"`  // -1: no PSI on this host
}

// PoolStatus is the warm pool.
type PoolStatus struct {
	Idle     int   `json:"idle"`
	Starting int   `json:"starting"`
	Target   int   `json:"target"`
	Size     int   `json:"size"`
	MaxSize  int   `json:"max_size"`
	Claims   int64 `json:"claims"`
	Misses   int64 `json:"misses"` // claims that found no warm kernel
	Grown    int64 `json:"grown"`  // times the target grew under a burst
}

// memoryReading is the last tick's memory reading.
type memoryReading struct {
	kernels int64
	host    capacity.HostMemory
	read    bool
}

// Watch is the node's capacity as resolved at start, its memory as last read and its
// hibernations.
type Watch struct {
	Budget       capacity.Budget
	Read         capacity.MemorySource // the host's memory, read every loop tick
	hibernations *prometheus.CounterVec
	kernelMemory prometheus.Gauge

	mu        sync.Mutex
	evictions map[string]int64 // hibernations by reason
	last      memoryReading    // the last tick's reading
}

// New is a watch of a node with budget, reading the host with read, counting its hibernations and
// its kernels' memory in the given metrics.
func New(budget capacity.Budget, read capacity.MemorySource, hibernations *prometheus.CounterVec, kernelMemory prometheus.Gauge) *Watch {
	return &Watch{Budget: budget, Read: read, hibernations: hibernations, kernelMemory: kernelMemory}
}

// NoteMemory keeps the tick's reading for Status and the metrics.
func (w *Watch) NoteMemory(kernels int64, h capacity.HostMemory) {
	w.mu.Lock()
	w.last = memoryReading{kernels: kernels, host: h, read: true}
	w.mu.Unlock()
	w.kernelMemory.Set(float64(kernels))
}

// CountHibernation counts a hibernation by reason (the status endpoint and its metric).
func (w *Watch) CountHibernation(reason string) {
	w.hibernations.WithLabelValues(reason).Inc()
	w.mu.Lock()
	if w.evictions == nil {
		w.evictions = map[string]int64{}
	}
	w.evictions[reason]++
	w.mu.Unlock()
}

// Report fills st's evictions and memory from the watch.
func (w *Watch) Report(st *NodeStatus) {
	w.mu.Lock()
	st.Evictions = make(map[string]int64, len(w.evictions))
	for k, v := range w.evictions {
		st.Evictions[k] = v
	}
	mem := w.last
	w.mu.Unlock()
	if !mem.read {
		mem.host = capacity.HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}
	}
	st.Memory = MemoryStatus{KernelBytes: mem.kernels, AvailableBytes: mem.host.AvailableBytes, PSIFullAvg10: mem.host.PSIFullAvg10}
}

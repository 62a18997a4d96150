package session

import (
	"context"

	"github.com/carryover/carryover/server/capacity"
)

// Memory pressure: every loop tick the service compares what its kernels hold (their resident
// memory at the last cost sample) with capacity.memory_budget_bytes, and the host's room
// (MemAvailable, the cgroup's limit) with capacity.reserve_bytes, and reads PSI
// (/proc/pressure/memory) where the kernel has it. Over any of them, idle sessions are hibernated,
// least recently used first, until enough is freed; busy ones never are. This runs long before the
// OOM killer would, and should it act anyway, kernels carry a higher oom_score_adj than the server
// (kernel.KernelOOMScoreAdj): it takes a kernel, whose session comes back from its checkpoint.

// HostMemory, MemorySource and ProcMemory are the pressure watch's reading of the host (package
// capacity), named here for Options.Memory.
type (
	HostMemory   = capacity.HostMemory
	MemorySource = capacity.MemorySource
)

// ProcMemory reads MemAvailable (bounded by the cgroup's limit minus its use), and PSI.
var ProcMemory = capacity.ProcMemory

// kernelMemory is what the live kernels cost together at their last samples (capacity.KernelMemory:
// the node's shared buffer copies counted once, not once in every fork child that maps them).
func (s *Service) kernelMemory(live []*Session) int64 {
	rs := make([]capacity.Resident, 0, len(live))
	for _, ls := range live {
		ls.mu.Lock()
		rs = append(rs, ls.residentLocked())
		ls.mu.Unlock()
	}
	return capacity.KernelMemory(rs, s.sharedHeld())
}

// residentLocked is the session's kernel memory at its last cost sample, as the memory watch and
// the eviction count it. The caller holds ls.mu.
func (ls *Session) residentLocked() capacity.Resident {
	return capacity.Resident{RSS: ls.cost.RSS(), Shmem: ls.cost.Shmem(), Own: ls.cost.Own()}
}

// sharedHeld is the bytes of the shared buffer copies the node holds (0 without
// persistence.shared_buffers).
func (s *Service) sharedHeld() int64 {
	_, n := s.ckpt.Shared.Held()
	return n
}

// relieveMemory hibernates idle sessions, least recently used first, while memory is short (the
// background loop calls it every tick, after sampling the kernels).
func (s *Service) relieveMemory(ctx context.Context) {
	h, err := s.watch.Read()
	if err != nil {
		h = HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}
	}
	used := s.kernelMemory(s.liveSessions())
	s.watch.NoteMemory(used, h)
	excess := capacity.MemoryExcess(used, s.watch.Budget.Memory, h, s.cfg.MemoryReserve, s.cfg.PSIThreshold, s.watch.Budget.KernelBytes)
	for excess > 0 {
		freed, ok := s.evictIdle(ctx, capacity.ReasonMemory)
		if !ok {
			return // every kernel left is busy: never hibernated
		}
		excess -= max(freed, 1)
	}
}

package capacity

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory pressure: every loop tick the service compares what its kernels hold (their resident
// memory at the last cost sample) with capacity.memory_budget_bytes, and the host's room
// (MemAvailable, the cgroup's limit) with capacity.reserve_bytes, and reads PSI
// (/proc/pressure/memory) where the kernel has it. Over any of them, idle sessions are hibernated,
// least recently used first, until enough is freed; busy ones never are. This runs long before the
// OOM killer would, and should it act anyway, kernels carry a higher oom_score_adj than the server
// (kernel.KernelOOMScoreAdj): it takes a kernel, whose session comes back from its checkpoint.

// HostMemory is what the host says of its memory.
type HostMemory struct {
	AvailableBytes int64   // MemAvailable, or the cgroup's room when smaller; -1: unknown
	PSIFullAvg10   float64 // /proc/pressure/memory "full avg10" (% of time every task stalled); -1: no PSI
}

// MemorySource reads the host's memory. The service's default reads /proc; a test passes its own
// (Options.Memory) to simulate pressure without exhausting the machine.
type MemorySource func() (HostMemory, error)

// ProcMemory reads MemAvailable (bounded by the cgroup's limit minus its use), and PSI.
func ProcMemory() (HostMemory, error) {
	h := HostMemory{AvailableBytes: -1, PSIFullAvg10: -1}
	avail, err := memAvailable()
	if err != nil {
		return h, err
	}
	h.AvailableBytes = avail
	if limit, used, ok := cgroupMemory(); ok && limit-used < avail {
		h.AvailableBytes = max(limit-used, 0)
	}
	if b, err := os.ReadFile("/proc/pressure/memory"); err == nil {
		h.PSIFullAvg10 = psiFullAvg10(b)
	}
	return h, nil
}

// memAvailable is /proc/meminfo's MemAvailable in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no MemAvailable in /proc/meminfo")
}

// psiFullAvg10 parses the "full avg10=" figure of a PSI file (-1 when absent).
func psiFullAvg10(b []byte) float64 {
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 || f[0] != "full" {
			continue
		}
		if v, ok := strings.CutPrefix(f[1], "avg10="); ok {
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				return x
			}
		}
	}
	return -1
}

// cgroupMemory is the limit and use of this process's memory cgroup (v2 memory.max, or v1
// memory.limit_in_bytes); ok is false without a limit.
func cgroupMemory() (limit, used int64, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var limitF, usedF string
		switch {
		case parts[0] == "0" && parts[1] == "":
			d := filepath.Join("/sys/fs/cgroup", parts[2])
			limitF, usedF = filepath.Join(d, "memory.max"), filepath.Join(d, "memory.current")
		case parts[1] == "memory":
			d := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			limitF, usedF = filepath.Join(d, "memory.limit_in_bytes"), filepath.Join(d, "memory.usage_in_bytes")
		default:
			continue
		}
		l, err1 := readInt(limitF)
		u, err2 := readInt(usedF)
		// v1 says "no limit" with a huge number; v2 with "max" (a parse error).
		if err1 == nil && err2 == nil && l > 0 && l < 1<<60 {
			return l, u, true
		}
	}
	return 0, 0, false
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// MemoryExcess is how many bytes of kernel memory to free now: what the kernels hold (used) beyond
// the budget, what the host lacks of its reserve, and at least one kernel's worth while PSI says
// tasks stall on memory (psiThreshold <= 0: PSI ignored).
func MemoryExcess(used, budget int64, h HostMemory, reserve int64, psiThreshold float64, kernelBytes int64) int64 {
	var excess int64
	if budget > 0 && used > budget {
		excess = used - budget
	}
	if h.AvailableBytes >= 0 && reserve > 0 && h.AvailableBytes < reserve {
		excess = max(excess, reserve-h.AvailableBytes)
	}
	if psiThreshold > 0 && h.PSIFullAvg10 >= psiThreshold {
		excess = max(excess, max(kernelBytes, 1))
	}
	return excess
}

// Resident is a kernel's memory at its last sample: RSS, the part of it that is shared memory
// (RssShmem), and what it costs on its own where that is known (Own, kernel.ProcStats.OwnBytes: a
// kernel forked from a template into a box, whose RSS counts the template's pages it maps).
type Resident struct{ RSS, Shmem, Own int64 }

// Charged is what the kernel costs the node beyond the shared buffer copies it may map: its RSS less
// its shared memory, but less at most sharedHeld (the bytes of every copy the node holds,
// persistence.SharedBuffers.Held). A fork's 100 children of a 1 GiB array each map the one copy, and
// each child's RSS holds all of it: summed, 100 GiB for 1 GiB of memory, and the watch hibernated
// ~80 of them at once. A kernel cannot map more of the copies than there are, so one that makes
// shared memory of its own (MAP_SHARED, /dev/shm) hides at most sharedHeld of it, and none while the
// node holds no copy; what it writes into a copy is private (anonymous) and counted.
//
// A kernel whose own cost is known is charged that: summed, the RSS of 120 data-science kernels
// forked from one template said 15.3 GB while the host had used ~2.8 GB of its memory, and the
// watch would have hibernated sessions at ~180 live on a 24 GiB node that holds ~800.
func (r Resident) Charged(sharedHeld int64) int64 {
	if r.Own > 0 {
		return r.Own
	}
	return r.RSS - min(r.Shmem, max(sharedHeld, 0))
}

// KernelMemory is what the kernels cost together (the memory watch's "used"): each one's Charged,
// plus the shared copies once.
func KernelMemory(kernels []Resident, sharedHeld int64) int64 {
	var sum int64
	for _, r := range kernels {
		sum += r.Charged(sharedHeld)
	}
	return sum + max(sharedHeld, 0)
}

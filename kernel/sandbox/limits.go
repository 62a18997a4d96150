package sandbox

import (
	"strconv"
	"strings"

	"github.com/carryover/carryover/kernel"
)

// Limits are the resources of one sandbox. Zero means "no limit" for each field.
type Limits struct {
	MemoryBytes int64   // resident memory (cgroup memory.max), else address space (RLIMIT_AS)
	CPUs        float64 // CPU time per wall-clock second (cgroup cpu.max); no fallback without cgroups
	Pids        int     // processes and threads (cgroup pids.max and RLIMIT_NPROC of the sandbox uid)
}

// String is for logs and events: "memory=4Gi cpus=2 pids=512".
func (l Limits) String() string {
	var parts []string
	if l.MemoryBytes > 0 {
		parts = append(parts, "memory="+kernel.FormatMemory(l.MemoryBytes))
	}
	if l.CPUs > 0 {
		parts = append(parts, "cpus="+strconv.FormatFloat(l.CPUs, 'f', -1, 64))
	}
	if l.Pids > 0 {
		parts = append(parts, "pids="+strconv.Itoa(l.Pids))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

package capacity

import (
	"sort"
	"time"
)

// Eviction frees a live-kernel slot or memory by hibernating an idle session (the caller's
// checkpointed hibernation: nothing is lost). A session running a turn is never a candidate.

// Hibernation reasons: the session_hibernated event's reason and the hibernations metric's label.
const (
	ReasonCapacity  = "capacity"  // a claim found the node full (capacity.max_live_kernels)
	ReasonMemory    = "memory"    // memory pressure (capacity.memory_budget_bytes, PSI, MemAvailable)
	ReasonIdle      = "idle"      // cull.idle_seconds
	ReasonRequested = "requested" // POST .../hibernate
)

// Candidate is a session holding a live kernel as eviction sees it; Item is the caller's handle.
type Candidate[T any] struct {
	Item         T
	Tenant       string
	LastActivity time.Time
	Busy         bool // a turn is running (or queued for it): never evicted
	Background   bool // it had background processes at the last sample: a hibernation ends them
}

// EvictionOrder returns the idle candidates, best victim first: those of a tenant over its fair
// share (over, Ledger.OverShare) before the others, then those without background processes before
// those with, then least recently active first.
func EvictionOrder[T any](cands []Candidate[T], over map[string]bool) []T {
	idle := make([]Candidate[T], 0, len(cands))
	for _, c := range cands {
		if !c.Busy {
			idle = append(idle, c)
		}
	}
	sort.SliceStable(idle, func(i, j int) bool {
		if oi, oj := over[idle[i].Tenant], over[idle[j].Tenant]; oi != oj {
			return oi
		}
		if idle[i].Background != idle[j].Background {
			return !idle[i].Background
		}
		return idle[i].LastActivity.Before(idle[j].LastActivity)
	})
	out := make([]T, len(idle))
	for i, c := range idle {
		out[i] = c.Item
	}
	return out
}

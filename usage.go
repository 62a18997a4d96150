package carryover

// Usage is what one session has used (GET /api/sessions/{id}/usage): over its whole life, every
// kernel it had counted (a restart or a wake after hibernation adds to the figures, never resets
// them). It is a view of its own rather than part of the session document because stored_bytes is
// counted from the store's checkpoints, too dear for every document of a session list.
type Usage struct {
	SessionID string `json:"session_id"`
	// CPUSeconds is user+system CPU of the session's kernels and shell commands: budget_consumed's
	// cpu_seconds, the figure its cost is computed from.
	CPUSeconds     float64 `json:"cpu_seconds"`
	MemoryGiBHours float64 `json:"memory_gib_hours"`
	// MemoryPeakBytes is the largest resident memory any kernel of the session was sampled at (once
	// a second while live, and at the end of each turn); MemoryBytes the current kernel's at its last
	// sample (0 without a live kernel).
	MemoryPeakBytes int64 `json:"memory_peak_bytes"`
	MemoryBytes     int64 `json:"memory_bytes"`
	// StoredBytes is what the session's kept checkpoints wrote to the store (namespaces, workspace
	// files and manifests, after deduplication and compression): the figure the tenant's
	// stored_bytes quota adds up. Checkpoints is how many are kept.
	StoredBytes int64 `json:"stored_bytes"`
	Checkpoints int   `json:"checkpoints"`
	// Sandbox is the session's sandbox status (live, hibernated, ...).
	Sandbox string `json:"sandbox"`
}

package client

import (
	"context"
	"net/http"
)

// Usage is GET /api/sessions/{id}/usage: what a session has used since it was created, every
// kernel it had counted (a restart or a wake after hibernation adds, never resets).
type Usage struct {
	SessionID       string  `json:"session_id"`
	CPUSeconds      float64 `json:"cpu_seconds"`       // its kernels' and shell commands' CPU
	MemoryGiBHours  float64 `json:"memory_gib_hours"`  // resident memory over time
	MemoryPeakBytes int64   `json:"memory_peak_bytes"` // the largest resident memory any of its kernels was sampled at
	MemoryBytes     int64   `json:"memory_bytes"`      // the live kernel's now (0 without one)
	StoredBytes     int64   `json:"stored_bytes"`      // what its kept checkpoints wrote to the store
	Checkpoints     int     `json:"checkpoints"`
	Sandbox         string  `json:"sandbox"` // none, starting, live or hibernated
}

// usageAnswer is the answer's envelope (named so that client/speccheck checks it).
type usageAnswer struct {
	Usage Usage `json:"usage"`
}

// Usage fetches what session id has used: CPU seconds, memory peak, stored bytes.
func (c *Client) Usage(ctx context.Context, id string) (*Usage, error) {
	var out usageAnswer
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "usage"), nil, &out); err != nil {
		return nil, err
	}
	return &out.Usage, nil
}

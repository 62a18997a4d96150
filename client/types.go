package client

import (
	"encoding/json"
	"time"
)

// Session states.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StatePaused    = "paused"
	StateRotating  = "rotating"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Session is the API's Session object.
type Session struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	Language       string         `json:"language"`
	State          string         `json:"state"`
	Sandbox        Sandbox        `json:"sandbox"`
	Data           map[string]any `json:"data"`
	AgentContext   AgentContext   `json:"agent_context"`
	Budget         Budget         `json:"budget"`
	BudgetConsumed BudgetConsumed `json:"budget_consumed"`
	Rotation       Rotation       `json:"rotation"`
	ClientID       string         `json:"client_id,omitempty"`
	Tenant         string         `json:"tenant"`
	OwnerNode      string         `json:"owner_node,omitempty"` // in a cluster, the node serving the session
	LastCheckpoint *CheckpointRef `json:"last_checkpoint"`
	ExecutionCount int            `json:"execution_count"`
	StopReason     string         `json:"stop_reason,omitempty"`
	// RunningSince is when the session last became running (nil when it is not running): what
	// budget_consumed.duration_seconds counts from.
	RunningSince *time.Time `json:"running_since,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	LastActivity time.Time  `json:"last_activity"`
}

// Sandbox is the session's kernel and its limits.
type Sandbox struct {
	ID             string     `json:"id,omitempty"`
	Status         string     `json:"status"` // none|starting|live|hibernated
	CPUs           string     `json:"cpus,omitempty"`
	Memory         string     `json:"memory,omitempty"`
	Disk           string     `json:"disk,omitempty"` // the workspace disk size asked for at create
	TimeoutSeconds float64    `json:"timeout_seconds,omitempty"`
	Network        bool       `json:"network"`
	NetworkAllow   []string   `json:"network_allow,omitempty"` // the egress allowlist, if any
	Skills         string     `json:"skills,omitempty"`        // "rw": may change the tenant's skills
	StartedAt      *time.Time `json:"started_at,omitempty"`
}

// AgentContext is the working dir, env vars and custom state kept across rotations.
type AgentContext struct {
	WorkingDir  string            `json:"working_dir"`
	EnvVars     map[string]string `json:"env_vars"`
	CustomState map[string]any    `json:"custom_state"`
}

// Budget limits; zero means no limit (and is left out of requests).
type Budget struct {
	CostCapCents         float64 `json:"cost_cap_cents,omitempty"`
	IterationLimit       int     `json:"iteration_limit,omitempty"`
	DurationLimitSeconds float64 `json:"duration_limit_seconds,omitempty"`
}

// BudgetConsumed is what the session has used so far.
type BudgetConsumed struct {
	CostCents       float64 `json:"cost_cents"`
	Iterations      int     `json:"iterations"`
	DurationSeconds float64 `json:"duration_seconds"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	MemoryGiBHours  float64 `json:"memory_gib_hours"`
}

// Rotation settings.
type Rotation struct {
	PreRotateBufferSeconds float64 `json:"pre_rotate_buffer_seconds,omitempty"`
}

// CheckpointRef points at a session's newest checkpoint.
type CheckpointRef struct {
	ID        string    `json:"id"`
	Turn      int       `json:"turn"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateRequest is the body of POST /api/sessions; every field is optional.
type CreateRequest struct {
	SessionID string          `json:"session_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Language  string          `json:"language,omitempty"`
	Data      map[string]any  `json:"data,omitempty"`
	Budget    *Budget         `json:"budget,omitempty"`
	Sandbox   *SandboxRequest `json:"sandbox,omitempty"`
	Rotation  *Rotation       `json:"rotation,omitempty"`
	ClientID  string          `json:"client_id,omitempty"`
	Start     bool            `json:"start,omitempty"`
}

// SandboxRequest asks for a session's limits; nil and "" fields take the server's defaults.
type SandboxRequest struct {
	CPUs           string   `json:"cpus,omitempty"`
	Memory         string   `json:"memory,omitempty"`
	Disk           string   `json:"disk,omitempty"` // the workspace disk's size, e.g. "20Gi"
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty"`
	Network        *bool    `json:"network,omitempty"`
	// NetworkAllow, when not nil, asks for an egress allowlist instead of Network: sent as
	// "network": {"allow": [...]}.
	NetworkAllow []string `json:"-"`
	Skills       string   `json:"skills,omitempty"` // "rw" to let the session change its tenant's skills
}

// MarshalJSON sends NetworkAllow as the network object.
func (r SandboxRequest) MarshalJSON() ([]byte, error) {
	type plain SandboxRequest
	if r.NetworkAllow == nil {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		Network map[string][]string `json:"network"`
	}{plain(r), map[string][]string{"allow": r.NetworkAllow}})
}

// ContextRequest is the body of PATCH .../context: the keys given replace the session's.
type ContextRequest struct {
	WorkingDir  *string           `json:"working_dir,omitempty"`
	EnvVars     map[string]string `json:"env_vars,omitempty"`
	CustomState map[string]any    `json:"custom_state,omitempty"`
}

// Output is one item of a run's outputs, as the kernel produced it (kernel.Output on the server).
type Output struct {
	Type           string                     `json:"type"` // stream|display_data|update_display_data|execute_result|error|clear_output
	Name           string                     `json:"name,omitempty"`
	Text           string                     `json:"text,omitempty"`
	Data           map[string]json.RawMessage `json:"data,omitempty"`
	Metadata       map[string]json.RawMessage `json:"metadata,omitempty"`
	Transient      map[string]json.RawMessage `json:"transient,omitempty"`
	ExecutionCount int                        `json:"execution_count,omitempty"`
	EName          string                     `json:"ename,omitempty"`
	EValue         string                     `json:"evalue,omitempty"`
	Traceback      []string                   `json:"traceback,omitempty"`
	Wait           bool                       `json:"wait,omitempty"`
}

// DataString returns Data[mime] when it is a JSON string (text/plain, text/html, image/png's
// base64, ...), or "" when it is absent or not a string.
func (o Output) DataString(mime string) string {
	var s string
	if raw, ok := o.Data[mime]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

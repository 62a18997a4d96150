package carryover

import (
	"regexp"
	"time"
)

// Session states (docs/api.md).
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StatePaused    = "paused"
	StateRotating  = "rotating"
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Sandbox statuses: whether the session holds a kernel now.
const (
	SandboxNone       = "none"
	SandboxStarting   = "starting"
	SandboxLive       = "live"
	SandboxHibernated = "hibernated"
)

// Skills modes of a session (Sandbox.Skills): a session reads its tenant's skills at /skills, and
// writes them only when created with "rw".
const (
	SkillsReadOnly  = "ro"
	SkillsReadWrite = "rw"
)

// DefaultTenant owns sessions made with auth.token and those from before tenants existed.
const DefaultTenant = "default"

// SessionIDPattern is what a session id must match.
var SessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Session is the API's Session object; stores keep it whole as a JSON document.
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
	OwnerNode      *string        `json:"owner_node,omitempty"` // the node serving it, in a cluster (node.go)
	LastCheckpoint *CheckpointRef `json:"last_checkpoint"`
	ExecutionCount int            `json:"execution_count"`
	StopReason     string         `json:"stop_reason,omitempty"`
	BudgetWarned   []string       `json:"budget_warned,omitempty"`
	// MemoryPeakBytes is the largest resident memory a kernel of the session was sampled at: kept
	// in the document so it outlives the kernel (a restart, a hibernation, the server's restart).
	// Shown by the usage view (Usage), not in the document's View.
	MemoryPeakBytes int64      `json:"memory_peak_bytes,omitempty"`
	RunningSince    *time.Time `json:"running_since,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	LastActivity    time.Time  `json:"last_activity"`
}

// Sandbox describes the session's kernel ("sandbox" in StateSet's words).
type Sandbox struct {
	ID             string  `json:"id,omitempty"`
	Status         string  `json:"status"`
	CPUs           string  `json:"cpus,omitempty"`
	Memory         string  `json:"memory,omitempty"`
	Disk           string  `json:"disk,omitempty"` // the workspace disk's size asked for ("" = the server's sandbox.disk)
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	Network        bool    `json:"network"`
	// NetworkAllow is the egress allowlist of a session created with network {"allow": [...]}
	// (Network is then false): its only way out is the server's filtering proxy.
	NetworkAllow []string `json:"network_allow,omitempty"`
	// Skills is "rw" when the session may change its tenant's skills at /skills (else read-only).
	Skills    string     `json:"skills,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
}

// AgentContext is the working dir, env vars and custom state kept across rotations.
type AgentContext struct {
	WorkingDir  string            `json:"working_dir"`
	EnvVars     map[string]string `json:"env_vars"`
	CustomState map[string]any    `json:"custom_state"`
}

// Rotation settings.
type Rotation struct {
	PreRotateBufferSeconds float64 `json:"pre_rotate_buffer_seconds,omitempty"`
}

// CheckpointRef points at the session's newest checkpoint.
type CheckpointRef struct {
	ID        string    `json:"id"`
	Turn      int       `json:"turn"`
	CreatedAt time.Time `json:"created_at"`
}

// Closed reports whether the session reached a terminal state.
func (s *Session) Closed() bool {
	return s.State == StateCompleted || s.State == StateFailed || s.State == StateCancelled
}

// transitions lists the legal lifecycle moves; anything else is a conflict.
var transitions = map[string]map[string]bool{
	StatePending:  {StateRunning: true, StateCompleted: true, StateCancelled: true, StateFailed: true},
	StateRunning:  {StatePaused: true, StateRotating: true, StateCompleted: true, StateCancelled: true, StateFailed: true},
	StatePaused:   {StateRunning: true, StateCompleted: true, StateCancelled: true, StateFailed: true},
	StateRotating: {StateRunning: true, StateFailed: true, StateCancelled: true},
}

// CanMove reports whether from -> to is a legal lifecycle move.
func CanMove(from, to string) bool { return transitions[from][to] }

// MoveError is the conflict answered for an illegal move.
func MoveError(from, to string) *Error {
	return Errorf(CodeConflict, "cannot move session from %s to %s", from, to).WithDetails("state", from, "requested", to)
}

// SetState moves the session and keeps the duration clock: it runs only while the state is running
// (paused, pending and closed time are excluded from duration_limit_seconds).
func (s *Session) SetState(to string, now time.Time) {
	if s.State == StateRunning && to != StateRunning && to != StateRotating && s.RunningSince != nil {
		s.BudgetConsumed.DurationSeconds += now.Sub(*s.RunningSince).Seconds()
		s.RunningSince = nil
	}
	if to == StateRunning && s.RunningSince == nil {
		t := now
		s.RunningSince = &t
	}
	s.State = to
}

// View is the document as clients see it: budget_consumed current to this instant, internal
// bookkeeping left out.
func (s Session) View() Session {
	if s.RunningSince != nil {
		s.BudgetConsumed.DurationSeconds += time.Since(*s.RunningSince).Seconds()
	}
	s.BudgetWarned = nil
	s.MemoryPeakBytes = 0
	return s
}

// Recovered is the document as a server that loads it from the store must hold it: no kernel runs
// for it there yet (after a restart, or on the node that just took it over), so a rotation that was
// under way is over (running) and a live or starting sandbox is hibernated (its next use wakes it
// from the last checkpoint).
func (s Session) Recovered() Session {
	if s.State == StateRotating {
		s.State = StateRunning
	}
	if s.Sandbox.Status == SandboxLive || s.Sandbox.Status == SandboxStarting {
		s.Sandbox.Status = SandboxHibernated
	}
	return s
}

// TenantName is the session's tenant; sessions from before tenants existed belong to the default one.
func (s *Session) TenantName() string {
	if s.Tenant == "" {
		return DefaultTenant
	}
	return s.Tenant
}

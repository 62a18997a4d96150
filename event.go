package carryover

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Event is one entry of a session's append-only event log. SequenceNumber counts from 1 without
// gaps, so a client that saw n events resumes with "after n" and misses nothing.
type Event struct {
	SessionID      string          `db:"session_id" json:"-"`
	SequenceNumber int64           `db:"seq" json:"sequence_number"`
	EventType      string          `db:"event_type" json:"event_type"`
	Payload        json.RawMessage `db:"payload" json:"payload"`
	CreatedAt      time.Time       `db:"created_at" json:"created_at"`
}

// EventQuery selects events of a session's log: those after sequence After and before sequence
// Before (0: unbounded), only those of Type when set, at most Limit of them (<= 0: all). Limit counts
// from the oldest, or with Newest from the newest (answered newest first then): a client opening a
// long log lists its end without reading it all, then pages back with Before.
type EventQuery struct {
	After, Before int64
	Limit         int
	Type          string
	Newest        bool
}

// Event types: docs/api.md's and carryover's own (session_hibernated, session_forked,
// checkpoint_failed, sandbox_limit_exceeded, kernel_restarted). Emit them by these names, never by
// string literal.
const (
	EventSessionStarted       = "session_started"
	EventSessionPaused        = "session_paused"
	EventSessionResumed       = "session_resumed"
	EventSessionCompleted     = "session_completed"
	EventSessionFailed        = "session_failed"
	EventSessionCancelled     = "session_cancelled"
	EventSessionHibernated    = "session_hibernated"
	EventSessionForked        = "session_forked" // on both sessions: {"session_id": the other one, "checkpoint_id": the source checkpoint}
	EventSandboxCreated       = "sandbox_created"
	EventSandboxTerminated    = "sandbox_terminated"
	EventSandboxLimitExceeded = "sandbox_limit_exceeded"
	EventRotationStarted      = "rotation_started"
	EventRotationCompleted    = "rotation_completed"
	EventRotationFailed       = "rotation_failed"
	EventExecStarted          = "exec_started"
	EventExecCompleted        = "exec_completed"
	EventBudgetWarning        = "budget_warning"
	EventBudgetExceeded       = "budget_exceeded"
	EventCheckpointCreated    = "checkpoint_created"
	EventCheckpointRestored   = "checkpoint_restored"
	EventCheckpointFailed     = "checkpoint_failed"
	EventToolRegistered       = "tool_registered"
	EventHeartbeat            = "heartbeat"
	EventKernelDied           = "kernel_died"
	EventVariablesSkipped     = "variables_skipped"
	EventKernelRestarted      = "kernel_restarted" // Jupyter's restart (a fresh kernel, an empty namespace): {"fresh": true}
)

// EventTypes is every event type carryover logs, in the order above: GET .../events?event_type=
// refuses another name unless the session's log holds it (a typo answered an empty log, as if
// nothing had happened; an archive from a newer build may hold types this one does not log).
var EventTypes = []string{
	EventSessionStarted, EventSessionPaused, EventSessionResumed, EventSessionCompleted, EventSessionFailed,
	EventSessionCancelled, EventSessionHibernated, EventSessionForked, EventSandboxCreated, EventSandboxTerminated,
	EventSandboxLimitExceeded, EventRotationStarted, EventRotationCompleted, EventRotationFailed, EventExecStarted,
	EventExecCompleted, EventBudgetWarning, EventBudgetExceeded, EventCheckpointCreated, EventCheckpointRestored,
	EventCheckpointFailed, EventToolRegistered, EventHeartbeat, EventKernelDied, EventVariablesSkipped, EventKernelRestarted,
}

// KnownEventType says whether this build logs events of type t.
func KnownEventType(t string) bool { return slices.Contains(EventTypes, t) }

// EventTypeShaped says whether t could name an event type: lower-case words joined by "_", at
// most 64 bytes (every type carryover logs, and any a newer build would).
func EventTypeShaped(t string) bool {
	if t == "" || len(t) > 64 || t[0] == '_' || t[len(t)-1] == '_' {
		return false
	}
	for _, c := range []byte(t) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// UnknownEventType is the error of an event_type filter naming a type nobody logged.
func UnknownEventType(t string) error {
	return Errorf(CodeInvalid, "event_type %q is not one carryover logs (%s)", t, strings.Join(EventTypes, ", ")).
		WithDetails("field", "event_type")
}

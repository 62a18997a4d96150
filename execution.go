package carryover

import (
	"encoding/json"
	"time"
)

// Execution is one turn of a session as its history lists it: the code (or shell command) and the
// full answer as JSON.
type Execution struct {
	ID             int64           `db:"id" json:"-"`
	SessionID      string          `db:"session_id" json:"session_id"`
	ExecutionCount int             `db:"execution_count" json:"execution_count"`
	Kind           string          `db:"kind" json:"kind"` // "run" | "exec"
	Code           string          `db:"code" json:"code"`
	Status         string          `db:"status" json:"status"`
	Result         json.RawMessage `db:"result" json:"result"` // the full /run or /exec answer
	StartedAt      time.Time       `db:"started_at" json:"started_at"`
	DurationMS     float64         `db:"duration_ms" json:"duration_ms"`
}

// Tool is a tool registered in a session (name unique per session).
type Tool struct {
	SessionID   string          `db:"session_id" json:"-"`
	Name        string          `db:"name" json:"name"`
	ToolType    string          `db:"tool_type" json:"tool_type"`
	Description string          `db:"description" json:"description"`
	InputSchema json.RawMessage `db:"input_schema" json:"input_schema"`
	CreatedAt   time.Time       `db:"created_at" json:"created_at"`
}

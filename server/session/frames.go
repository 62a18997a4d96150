package session

import (
	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// Frames are what a session streams to its subscribers (websocket clients today), in the order the
// kernel produced them. Each type has exactly the fields docs/api.md gives it.

// StatusFrame says the kernel went busy (with the code) or the turn ended (idle, after the result).
type StatusFrame struct {
	Type           string `json:"type"` // "status"
	ID             string `json:"id"`
	ExecutionState string `json:"execution_state"`
	Code           string `json:"code,omitempty"`
}

// OutputFrame carries one output of a run.
type OutputFrame struct {
	Type   string        `json:"type"` // "output"
	ID     string        `json:"id"`
	Output kernel.Output `json:"output"`
}

// InputRequestFrame asks the session's clients to answer an input() prompt.
type InputRequestFrame struct {
	Type     string `json:"type"` // "input_request"
	ID       string `json:"id"`
	Prompt   string `json:"prompt"`
	Password bool   `json:"password"`
}

// ResultFrame is a run's answer, as POST /run would give it.
type ResultFrame struct {
	Type   string     `json:"type"` // "result"
	ID     string     `json:"id"`
	Result *RunResult `json:"result"`
}

// EventFrame carries one event of the session's log.
type EventFrame struct {
	Type  string          `json:"type"` // "event"
	Event carryover.Event `json:"event"`
}

// ErrorFrame is an error for the client (ID "" when not about one run).
type ErrorFrame struct {
	Type  string           `json:"type"` // "error"
	ID    string           `json:"id"`
	Error *carryover.Error `json:"error"`
}

// RunningFrame is what a client connecting mid-run gets first: the run so far and its pending prompt.
type RunningFrame struct {
	Type           string             `json:"type"` // "running"
	ID             string             `json:"id"`
	Code           string             `json:"code"`
	ExecutionCount *int               `json:"execution_count"`
	Outputs        []kernel.Output    `json:"outputs"`
	InputRequest   *InputRequestFrame `json:"input_request,omitempty"`
}

// NoticeFrame tells a slow client how many frames it missed.
type NoticeFrame struct {
	Type    string `json:"type"` // "notice"
	Message string `json:"message"`
	Dropped int64  `json:"dropped"`
}

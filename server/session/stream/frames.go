// Package stream is what a session streams to its subscribers (websocket clients): the frames, in
// the order the kernel produced them, and the hub that fans them out through each subscriber's
// bounded queue, so a slow client never blocks the kernel, the record or other clients.
package stream

import (
	"encoding/json"

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

// EventFrame carries one event of the session's log. Backlog marks an event logged before the
// subscription (sent from the store): a client lists it but does not announce it as news (a page
// opened after a kernel's death must not say "the kernel died").
type EventFrame struct {
	Type    string          `json:"type"` // "event"
	Event   carryover.Event `json:"event"`
	Backlog bool            `json:"backlog,omitempty"`
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

// CommFrame is one comm message between the kernel and a client, on the session's stream (kernel ->
// client) or the websocket (client -> kernel, where Content's comm_id, data, target_name are given).
type CommFrame struct {
	Type        string          `json:"type"`     // "comm"
	MsgType     string          `json:"msg_type"` // comm_open, comm_msg or comm_close
	MsgID       string          `json:"msg_id"`
	ParentMsgID string          `json:"parent_msg_id,omitempty"`
	Content     json.RawMessage `json:"content"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	Buffers     [][]byte        `json:"buffers,omitempty"` // base64 in JSON
}

// CommOutputFrame is an output an Output widget captured (the session's comm relay follows the captures): ParentMsgID is the
// message whose handling printed it (a cell's execute_request or a client's comm_msg).
type CommOutputFrame struct {
	Type        string        `json:"type"`    // "comm_output"
	CommID      string        `json:"comm_id"` // the Output widget's model
	ParentMsgID string        `json:"parent_msg_id"`
	Output      kernel.Output `json:"output"`
}

// CommIdleFrame says the kernel is done with a client's comm_msg (its handler returned): a widget
// manager sends a model's next update only then, as Jupyter's does.
type CommIdleFrame struct {
	Type        string `json:"type"` // "comm_idle"
	ParentMsgID string `json:"parent_msg_id"`
}

// CommResetFrame says the session's kernel is new: the widgets drawn so far have no model any more.
type CommResetFrame struct {
	Type    string `json:"type"` // "comm_reset"
	Message string `json:"message"`
}

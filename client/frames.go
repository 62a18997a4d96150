package client

import (
	"encoding/json"
)

// Frame types the server sends.
const (
	FrameStatus       = "status"        // ID, ExecutionState (busy|idle), Code on busy
	FrameOutput       = "output"        // ID, Output
	FrameInputRequest = "input_request" // ID, Prompt, Password: answer with InputReply
	FrameResult       = "result"        // ID, Result: the run answer
	FrameEvent        = "event"         // Event (after SubscribeEvents)
	FrameError        = "error"         // ID (may be ""), Error
	FrameRunning      = "running"       // on connect mid-run: ID, Code, Outputs so far, InputRequest
	FrameNotice       = "notice"        // Dropped frames this slow client missed, Message
	FramePong         = "pong"          // ID of the Ping
)

// Frame is one message from the server. Which fields are set depends on Type (see the Frame*
// constants); every run's frames, also of runs started over HTTP (id "run-<n>") or by other
// clients, reach every client of the session.
type Frame struct {
	Type           string     `json:"type"`
	ID             string     `json:"id,omitempty"`
	ExecutionState string     `json:"execution_state,omitempty"`
	Code           string     `json:"code,omitempty"`
	Output         *Output    `json:"output,omitempty"`
	Result         *RunResult `json:"result,omitempty"`
	Event          *Event     `json:"event,omitempty"`
	// Backlog marks an event frame sent from the store (logged before the subscription), not live.
	Backlog  bool       `json:"backlog,omitempty"`
	Error    *ErrorBody `json:"error,omitempty"`
	Prompt   string     `json:"prompt,omitempty"`
	Password bool       `json:"password,omitempty"`
	// InputRequest is the prompt pending when a "running" frame was sent (Type input_request).
	InputRequest   *Frame   `json:"input_request,omitempty"`
	Outputs        []Output `json:"outputs,omitempty"`
	ExecutionCount *int     `json:"execution_count,omitempty"`
	Dropped        int64    `json:"dropped,omitempty"`
	Message        string   `json:"message,omitempty"`
	// Raw is the frame as received, for fields this package does not know yet.
	Raw json.RawMessage `json:"-"`
}

// RunFrame runs code; its frames carry ID. TimeoutSeconds nil takes the server's default.
type RunFrame struct {
	ID             string   `json:"id,omitempty"`
	Code           string   `json:"code"`
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty"`
	// IdempotencyKey: a run frame sent again with the same key (after a reconnect) gets the first
	// one's answer instead of running again. Empty: RunFrame sets a new one.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// InputReply answers the input_request of run ID.
type InputReply struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

// Interrupt interrupts the session's running code. ID, if set, is the id of the error frame
// that answers an interrupt that failed.
type Interrupt struct {
	ID string `json:"id,omitempty"`
}

// SubscribeEvents asks for the stored events after AfterSequence, then live ones, as event frames.
type SubscribeEvents struct {
	AfterSequence int64 `json:"after_sequence"`
}

// Ping asks for a pong frame with the same ID (a round trip through the connection's queue).
type Ping struct {
	ID string `json:"id,omitempty"`
}

func (RunFrame) frameType() string        { return "run" }
func (InputReply) frameType() string      { return "input_reply" }
func (Interrupt) frameType() string       { return "interrupt" }
func (SubscribeEvents) frameType() string { return "subscribe_events" }
func (Ping) frameType() string            { return "ping" }

// typedFrame is a client frame that knows its "type".
type typedFrame interface{ frameType() string }

// encodeFrame marshals f, adding "type" for the frame types of this package; any other value is
// sent as it marshals (it must carry its own "type").
func encodeFrame(f any) ([]byte, error) {
	b, err := json.Marshal(f)
	tf, ok := f.(typedFrame)
	if err != nil || !ok {
		return b, err
	}
	typ, _ := json.Marshal(tf.frameType())
	out := append([]byte(`{"type":`), typ...)
	if len(b) > 2 { // not "{}"
		out = append(append(out, ','), b[1:]...)
		return out, nil
	}
	return append(out, '}'), nil
}

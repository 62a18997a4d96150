package client

import (
	"context"
	"net/http"
)

// Run statuses.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusAborted = "aborted"
)

// RunRequest is the body of POST .../run.
type RunRequest struct {
	Code       string         `json:"code"`
	UpdateData map[string]any `json:"update_data,omitempty"`
	// TimeoutSeconds nil takes the server's run.default_timeout_seconds.
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	// IdempotencyKey is sent as the Idempotency-Key header (and the body's field); empty: Run draws one per call, so the
	// call's retries (retry.go) never run the cell twice. Set it to retry a call across processes.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Stdin, when set, is what the cell's input() reads: a line per call, EOFError past its end
	// (nil: input() raises StdinNotImplementedError).
	Stdin *string `json:"stdin,omitempty"`
}

// RunResult is the answer of a run (also of /api/execute, without checkpoint).
type RunResult struct {
	SessionID      string    `json:"session_id,omitempty"`
	ExecutionCount int       `json:"execution_count"`
	Status         string    `json:"status"` // ok|error|aborted
	Stdout         string    `json:"stdout"`
	Stderr         string    `json:"stderr"`
	Result         *string   `json:"result"` // text/plain of the execute_result; nil if none
	Outputs        []Output  `json:"outputs"`
	Error          *RunError `json:"error"`
	DurationMS     float64   `json:"duration_ms"`
	// OutputDroppedBytes counts output cut at run.max_output_bytes.
	OutputDroppedBytes int64             `json:"output_dropped_bytes,omitempty"`
	Checkpoint         *CheckpointResult `json:"checkpoint,omitempty"`
	// CheckpointError says why the turn's checkpoint failed (the run itself succeeded).
	CheckpointError string `json:"checkpoint_error,omitempty"`
	// RecordError says why the turn ran but its record (history, execution count) was not saved.
	RecordError string `json:"record_error,omitempty"`
	// ProcessesEnded names background processes that ended when the session's previous kernel was
	// stopped on purpose (rotation, hibernation, stop) since the last answer.
	ProcessesEnded []EndedProcess `json:"processes_ended,omitempty"`
	// Restore reports the restore since the last answer (this run's own when its kernel had died or
	// the session was asleep): what replay rebuilt and what it could not. Told once.
	Restore *RestoreReport `json:"restore,omitempty"`
}

// EndedProcess is a background process that could not survive its kernel.
type EndedProcess struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
}

// RunError is the exception a run raised.
type RunError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// ExecuteRequest is the body of POST /api/execute.
type ExecuteRequest struct {
	Language       string   `json:"language,omitempty"`
	Code           string   `json:"code"`
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty"`
	// Stdin, when set, is what the code's input() reads, as RunRequest.Stdin.
	Stdin *string `json:"stdin,omitempty"`
	// IdempotencyKey is sent as the Idempotency-Key header; empty: Execute draws one per call, so
	// its retries (a reset connection, a restarted server) never run the code twice.
	IdempotencyKey string `json:"-"`
}

// CompleteReply is the kernel's completion of code at a cursor.
type CompleteReply struct {
	Matches     []string       `json:"matches"`
	CursorStart int            `json:"cursor_start"`
	CursorEnd   int            `json:"cursor_end"`
	Metadata    map[string]any `json:"metadata"`
}

// completeRequest is the body of POST .../complete.
type completeRequest struct {
	Code      string `json:"code"`
	CursorPos int    `json:"cursor_pos"`
}

// Seconds returns a pointer to s, for the optional timeout_seconds fields.
func Seconds(s float64) *float64 { return &s }

// Run runs code in the session's kernel. Code that raises is not an error here: the answer has
// status "error". On a timeout (504) or kernel death (502) Run returns the partial answer and an
// *Error together.
func (c *Client) Run(ctx context.Context, id string, req RunRequest) (*RunResult, error) {
	var res RunResult
	err := c.DoWithHeader(ctx, http.MethodPost, sessionPath(id, "run"), keyHeader(req.IdempotencyKey), req, &res)
	return withPartial(&res, err)
}

// keyHeader is the Idempotency-Key header of a call: key, or a new one.
func keyHeader(key string) http.Header {
	if key == "" {
		key = NewIdempotencyKey()
	}
	return http.Header{IdempotencyKeyHeader: {key}}
}

// Execute runs code in a throwaway session destroyed at once (POST /api/execute), exactly once
// under the client's retries (an idempotency key per call, or req's).
func (c *Client) Execute(ctx context.Context, req ExecuteRequest) (*RunResult, error) {
	var res RunResult
	err := c.DoWithHeader(ctx, http.MethodPost, "/api/execute", keyHeader(req.IdempotencyKey), req, &res)
	return withPartial(&res, err)
}

// Complete asks the kernel for completions of code at cursorPos (in characters). A session without
// a live kernel answers no matches.
func (c *Client) Complete(ctx context.Context, id, code string, cursorPos int) (*CompleteReply, error) {
	body := completeRequest{Code: code, CursorPos: cursorPos}
	var out CompleteReply
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "complete"), body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

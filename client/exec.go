package client

import (
	"context"
	"net/http"
)

// ExecRequest is the body of POST .../exec: a shell command in the session's sandbox.
type ExecRequest struct {
	// Command is a string (run under /bin/sh -c) or a []string (argv, no shell).
	Command        any               `json:"command"`
	WorkingDir     string            `json:"working_dir,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds *float64          `json:"timeout_seconds,omitempty"`
	// IdempotencyKey is sent as the Idempotency-Key header (and the body's field); empty: Exec draws one per call.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ExecResult is the answer of an exec.
type ExecResult struct {
	Stdout             string  `json:"stdout"`
	Stderr             string  `json:"stderr"`
	ExitCode           int     `json:"exit_code"`
	DurationMS         float64 `json:"duration_ms"`
	TimedOut           bool    `json:"timed_out,omitempty"`
	Interrupted        bool    `json:"interrupted,omitempty"` // killed by an interrupt of the session
	StdoutDroppedBytes int64   `json:"stdout_dropped_bytes,omitempty"`
	StderrDroppedBytes int64   `json:"stderr_dropped_bytes,omitempty"`
	// StdoutBase64 and StderrBase64 are the output's exact bytes when they are not UTF-8 (Stdout
	// and Stderr then carry U+FFFD in place of what a string could not hold); nil for text.
	StdoutBase64 []byte `json:"stdout_base64,omitempty"`
	StderrBase64 []byte `json:"stderr_base64,omitempty"`
	// RecordError says why the command ran but its record was not saved.
	RecordError string `json:"record_error,omitempty"`
}

// Exec runs a shell command in the session's sandbox. A non-zero exit is not an error (see
// ExitCode); a timeout returns the partial answer and an *Error with code "timeout".
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	var res ExecResult
	err := c.DoWithHeader(ctx, http.MethodPost, sessionPath(id, "exec"), keyHeader(req.IdempotencyKey), req, &res)
	return withPartial(&res, err)
}

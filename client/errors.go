package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Error codes of docs/api.md, for comparing with ErrorCode.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeUnauthorized    = "unauthorized"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeSessionPaused   = "session_paused"
	CodeSessionClosed   = "session_closed"
	CodeBudgetExceeded  = "budget_exceeded"
	CodePayloadTooLarge = "payload_too_large"
	CodeTimeout         = "timeout"
	CodeKernelDied      = "kernel_died"
	CodeNotOwner        = "not_owner" // 421, cluster only: the session's node was not reached; retry once
	// CodeIdempotencyKeyReused (422): the Idempotency-Key was first used with another request.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeRunInterrupted (409): the key's first attempt was cut off before its answer was stored;
	// the cell may have run and is not run again. Not retried: look at the session, then decide.
	CodeRunInterrupted = "run_interrupted"
	CodeCapacity       = "capacity" // 429: every live kernel of the node stayed busy; retry after Retry-After
	CodeInternal       = "internal"
)

// Error is an error answer of the API: {"error": {"code", "message", "details"}, "result": ...}.
// Callers branch on Code (stable) rather than Message (for humans).
type Error struct {
	// Status is the HTTP status; 0 for an error frame received over the websocket.
	Status  int
	Code    string
	Message string
	Details map[string]any
	// Result is the partial run or exec answer that timeouts and kernel deaths carry (else nil).
	// Run, Exec and Execute already decode it and return it beside the error.
	Result json.RawMessage
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("carryover: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("carryover: %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrorBody is the "error" object of an answer or of a websocket error frame.
type ErrorBody struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// Err turns a websocket error frame's body into an *Error (Status 0).
func (b *ErrorBody) Err() *Error {
	return &Error{Code: b.Code, Message: b.Message, Details: b.Details}
}

// ErrorCode returns the API error code of err ("not_found", "timeout", ...), or "" when err is not
// (and does not wrap) an *Error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// errorAnswer is the body of every error answer.
type errorAnswer struct {
	Error  *ErrorBody      `json:"error"`
	Result json.RawMessage `json:"result"`
}

// decodeError reads a non-2xx answer. A body that is not the API's error shape (a proxy's page, a
// truncated answer) still gives an *Error, with the status and the start of the body as message.
func decodeError(resp *http.Response) error {
	data, err := io.ReadAll(resp.Body)
	e := &Error{Status: resp.StatusCode}
	var body errorAnswer
	if err == nil && json.Unmarshal(data, &body) == nil && body.Error != nil {
		e.Code, e.Message, e.Details = body.Error.Code, body.Error.Message, body.Error.Details
		if len(body.Result) > 0 && string(body.Result) != "null" {
			e.Result = body.Result
		}
		return e
	}
	e.Message = http.StatusText(resp.StatusCode)
	if s := strings.TrimSpace(string(data)); s != "" {
		e.Message += ": " + truncate(s, 512)
	}
	return e
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// withPartial returns res beside err when err is an *Error carrying a partial answer (timeout,
// kernel_died), decoded into res; otherwise nil and err.
func withPartial[T any](res *T, err error) (*T, error) {
	if err == nil {
		return res, nil
	}
	var e *Error
	if errors.As(err, &e) && e.Result != nil && json.Unmarshal(e.Result, res) == nil {
		return res, err
	}
	return nil, err
}

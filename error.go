package carryover

import (
	"errors"
	"fmt"
	"math"
)

// Code is an error code of the public API (docs/api.md). Exactly one function, in the HTTP layer,
// maps codes to statuses; everything below it speaks codes.
type Code string

// The codes of docs/api.md.
const (
	CodeInvalid         Code = "invalid_request"
	CodeUnauthorized    Code = "unauthorized"
	CodeNotFound        Code = "not_found"
	CodeConflict        Code = "conflict"
	CodeSessionPaused   Code = "session_paused"
	CodeSessionClosed   Code = "session_closed"
	CodeBudgetExceeded  Code = "budget_exceeded"
	CodePayloadTooLarge Code = "payload_too_large"
	CodeTimeout         Code = "timeout"
	CodeKernelDied      Code = "kernel_died"
	CodeInternal        Code = "internal"
	// CodeCapacity: the node holds all the live kernels it can and every one is busy for the whole
	// queue time (capacity.queue_seconds). HTTP 429 with Retry-After; details say live, capacity,
	// queued and retry_after_seconds.
	CodeCapacity Code = "capacity"
)

// Error is carryover's one error type: a code, a message for humans and optional details. Result,
// when set, is a partial answer the caller may still want (a run's outputs before a timeout).
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	Result  any            `json:"-"`
	Err     error          `json:"-"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: c}) match any error of code c (and ErrNotFound & co below).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Errorf builds an *Error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails sets details from key, value pairs and returns e.
func (e *Error) WithDetails(kv ...any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Details[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return e
}

// Wrap returns an *Error of code with message whose cause is err.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorOf turns any error into an *Error; unknown errors become internal with a generic message (the
// cause is kept for logs, never shown: no internals leak to clients).
func ErrorOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}

// ErrorCode is the code of err ("" for nil, internal for errors that are not *Error).
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	return ErrorOf(err).Code
}

// Targets for errors.Is: any *Error of that code matches them.
var (
	ErrNotFound = &Error{Code: CodeNotFound}
	ErrConflict = &Error{Code: CodeConflict}
)

// ErrNewerFormat is wrapped by the refusal of a store that a newer carryover already writes in a
// format this one cannot read: at start, or at a cluster node's heartbeat after the cluster switched
// formats. A node refused at its heartbeat must stop serving and exit, not retry for ever.
var ErrNewerFormat = errors.New("the store's format is newer than this carryover reads")

// ErrMissingChunk is wrapped by store errors that name a chunk the store does not hold where one
// was required (a child of a put chunk, a root of a commit).
var ErrMissingChunk = errors.New("missing chunk")

// RetryAfter is the Retry-After of an error that says when to try again: its details'
// retry_after_seconds (a 429's), in whole seconds, at least 1. Every front door and the cluster
// router answer it from here, so a 429 says the same whichever layer refused.
func (e *Error) RetryAfter() (int, bool) {
	var secs float64
	switch v := e.Details["retry_after_seconds"].(type) {
	case int:
		secs = float64(v)
	case int64:
		secs = float64(v)
	case float64:
		secs = v
	default:
		return 0, false
	}
	return max(int(math.Ceil(secs)), 1), true
}

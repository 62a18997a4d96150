package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Code is an API error code of shared/API.md. Each maps to exactly one HTTP status in Status.
type Code string

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
)

// Status is the one place where error codes become HTTP statuses.
func (c Code) Status() int {
	switch c {
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict, CodeSessionPaused, CodeSessionClosed:
		return http.StatusConflict
	case CodeBudgetExceeded:
		return http.StatusPaymentRequired
	case CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeTimeout:
		return http.StatusGatewayTimeout
	case CodeKernelDied:
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// Error is the service's one error type: a code, a message for humans and optional details.
// Result, when set, is a partial run answer the caller may still want (timeout, kernel death).
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

// errorf builds an *Error.
func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// withDetails returns e with details set.
func (e *Error) withDetails(kv ...any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Details[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return e
}

// asError turns any error into an *Error; unknown errors become internal with a generic message
// (the cause is logged, not shown: no internals leak to clients).
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}

// writeError writes err in the API's error shape.
func writeError(w http.ResponseWriter, err error) {
	e := asError(err)
	body := map[string]any{"error": e}
	if e.Result != nil {
		body["result"] = e.Result
	}
	writeJSON(w, e.Code.Status(), body)
}

// writeJSON writes v as JSON with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v == nil {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

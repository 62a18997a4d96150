package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/carryover/carryover"
)

// statusOf is the one place where error codes become HTTP statuses.
func statusOf(c carryover.Code) int {
	switch c {
	case carryover.CodeInvalid:
		return http.StatusBadRequest
	case carryover.CodeUnauthorized:
		return http.StatusUnauthorized
	case carryover.CodeNotFound:
		return http.StatusNotFound
	case carryover.CodeConflict, carryover.CodeSessionPaused, carryover.CodeSessionClosed:
		return http.StatusConflict
	case carryover.CodeBudgetExceeded:
		return http.StatusPaymentRequired
	case carryover.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case carryover.CodeTimeout:
		return http.StatusGatewayTimeout
	case carryover.CodeKernelDied:
		return http.StatusBadGateway
	case carryover.CodeNotOwner:
		return http.StatusMisdirectedRequest
	case carryover.CodeForbidden:
		return http.StatusForbidden
	case carryover.CodeQuotaExceeded, carryover.CodeRateLimited:
		return http.StatusTooManyRequests
	case carryover.CodeIdempotencyKeyReused:
		return http.StatusUnprocessableEntity
	case carryover.CodeRunInterrupted:
		return http.StatusConflict
	case carryover.CodeCapacity:
		return http.StatusTooManyRequests
	default:
		return http.StatusInternalServerError
	}
}

// StatusOf is statusOf for the other front doors (the assembly hands it to them, as it does
// Authenticate), so a code has one status whichever door answers it.
func StatusOf(c carryover.Code) int { return statusOf(c) }

// writeError writes err in the API's error shape.
func writeError(w http.ResponseWriter, err error) {
	e := carryover.ErrorOf(err)
	if secs, ok := e.RetryAfter(); ok {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	body := map[string]any{"error": e}
	if e.Result != nil {
		body["result"] = e.Result
	}
	writeJSON(w, statusOf(e.Code), body)
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

package httpapi

import (
	"net/http/httptest"
	"testing"

	"github.com/carryover/carryover"
)

// TestCapacityErrorRetryAfter: a capacity error answers 429 with Retry-After from its details (in
// whole seconds, at least 1); an error without retry_after_seconds sets no header.
func TestCapacityErrorRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		header string
	}{
		{carryover.Errorf(carryover.CodeCapacity, "full").WithDetails("retry_after_seconds", 20), 429, "20"},
		{carryover.Errorf(carryover.CodeCapacity, "full").WithDetails("retry_after_seconds", 0.2), 429, "1"},
		{carryover.Errorf(carryover.CodeNotFound, "gone"), 404, ""},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, tc.err)
		if rec.Code != tc.status || rec.Header().Get("Retry-After") != tc.header {
			t.Errorf("%v: %d Retry-After %q, want %d %q", tc.err, rec.Code, rec.Header().Get("Retry-After"), tc.status, tc.header)
		}
	}
}

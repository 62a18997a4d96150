package httpapi

import (
	"net/http/httptest"
	"testing"
)

// TestIntParamKeepsAPage: a page's size is never unbounded. limit=0 was passed to the store as 0,
// which reads it as "no limit": a session's whole event log (or history) in one answer.
func TestIntParamKeepsAPage(t *testing.T) {
	for _, c := range []struct {
		query string
		want  int
		bad   bool
	}{
		{"", 50, false},
		{"limit=7", 7, false},
		{"limit=0", 1000, false},
		{"limit=5000", 1000, false},
		{"limit=-1", 0, true},
		{"limit=x", 0, true},
	} {
		got, err := intParam(httptest.NewRequest("GET", "/api/x?"+c.query, nil), "limit", 50, 1000)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%q: %d, %v; want %d (error: %v)", c.query, got, err, c.want, c.bad)
		}
	}
	// without a max (a sequence number), 0 is 0
	if got, err := intParam(httptest.NewRequest("GET", "/api/x?after_sequence=0", nil), "after_sequence", 0, 0); err != nil || got != 0 {
		t.Errorf("after_sequence=0: %d, %v", got, err)
	}
}

package httpapi

import (
	"net/http/httptest"
	"testing"

	"github.com/carryover/carryover"
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

// TestWrongTypeSaysJSONsWords: a field of the wrong type is named with the JSON type it must be
// ("must be an object"), not the Go type it decodes into ("map[string]interface {}").
func TestWrongTypeSaysJSONsWords(t *testing.T) {
	var req struct {
		Data    map[string]any    `json:"data"`
		Env     map[string]string `json:"env_vars"`
		Count   int               `json:"count"`
		Size    uint64            `json:"size"`
		Timeout *float64          `json:"timeout_seconds"`
		Paths   []string          `json:"paths"`
		Bytes   []byte            `json:"bytes"`
		Flag    bool              `json:"flag"`
		Name    string            `json:"name"`
	}
	for body, want := range map[string]string{
		`{"data": "x"}`:             `field "data" must be an object, not string`,
		`{"env_vars": {"A": 5}}`:    `field "env_vars" must be a string, not number`,
		`{"count": "3"}`:            `field "count" must be an integer, not string`,
		`{"count": 1.5}`:            `field "count" must be an integer, not number 1.5`,
		`{"size": -1}`:              `field "size" must be an integer of 0 or more, not number -1`,
		`{"timeout_seconds": "10"}`: `field "timeout_seconds" must be a number, not string`,
		`{"paths": "a"}`:            `field "paths" must be an array, not string`,
		`{"bytes": 5}`:              `field "bytes" must be a base64 string, not number`,
		`{"flag": "yes"}`:           `field "flag" must be true or false, not string`,
		`{"name": ["x"]}`:           `field "name" must be a string, not array`,
	} {
		err := unmarshal([]byte(body), &req)
		if e := carryover.ErrorOf(err); err == nil || e.Code != carryover.CodeInvalid || e.Message != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

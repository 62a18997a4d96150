package carryover_test

import (
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// TestWrongTypeSaysJSONsWords: a field of the wrong type is named with the JSON type it must be
// ("must be an object"), not the Go type it decodes into ("map[string]interface {}"); a time that
// is not RFC 3339 says so, not Go's layout ("2006-01-02T15:04:05Z07:00").
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
		At      time.Time         `json:"expires_at"`
	}
	for body, want := range map[string]string{
		`{"data": "x"}`:               `field "data" must be an object, not string`,
		`{"env_vars": {"A": 5}}`:      `field "env_vars" must be a string, not number`,
		`{"count": "3"}`:              `field "count" must be an integer, not string`,
		`{"count": 1.5}`:              `field "count" must be an integer, not number 1.5`,
		`{"size": -1}`:                `field "size" must be an integer of 0 or more, not number -1`,
		`{"timeout_seconds": "10"}`:   `field "timeout_seconds" must be a number, not string`,
		`{"paths": "a"}`:              `field "paths" must be an array, not string`,
		`{"bytes": 5}`:                `field "bytes" must be a base64 string, not number`,
		`{"flag": "yes"}`:             `field "flag" must be true or false, not string`,
		`{"name": ["x"]}`:             `field "name" must be a string, not array`,
		`{"expires_at": "yesterday"}`: `a time must be RFC 3339 (like 2026-12-31T23:59:00Z), not "yesterday"`,
	} {
		err := carryover.UnmarshalRequest([]byte(body), &req)
		if e := carryover.ErrorOf(err); err == nil || e.Code != carryover.CodeInvalid || e.Message != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

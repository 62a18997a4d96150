package carryover_test

import (
	"testing"

	"github.com/carryover/carryover"
)

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
		err := carryover.UnmarshalRequest([]byte(body), &req)
		if e := carryover.ErrorOf(err); err == nil || e.Code != carryover.CodeInvalid || e.Message != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

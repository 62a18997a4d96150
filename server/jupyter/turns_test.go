package jupyter

import (
	"encoding/json"
	"testing"
)

// TestStopOnError: an error aborts the queued cells as in ipykernel, by default and with
// stop_on_error true, but not for a silent request or one that asked not to.
func TestStopOnError(t *testing.T) {
	for content, want := range map[string]bool{
		`{"code":"1/0"}`:                       true,
		`{"code":"1/0","stop_on_error":true}`:  true,
		`{"code":"1/0","stop_on_error":false}`: false,
		`{"code":"1/0","silent":true}`:         false,
		`{"code":"1/0","stop_on_error":null}`:  true,
	} {
		if got := stopOnError(json.RawMessage(content)); got != want {
			t.Errorf("stopOnError(%s) = %v, want %v", content, got, want)
		}
	}
}

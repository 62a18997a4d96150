package carryover

import (
	"strings"
	"testing"
)

func TestEventTypeShaped(t *testing.T) {
	for _, typ := range append([]string{"widget_moved", "a", "x9_y"}, EventTypes...) {
		if !EventTypeShaped(typ) {
			t.Errorf("%q refused", typ)
		}
	}
	for _, typ := range []string{"", "_a", "a_", "Session_started", "a-b", "a b", "a\x00", "é", strings.Repeat("e", 65)} {
		if EventTypeShaped(typ) {
			t.Errorf("%q accepted", typ)
		}
	}
}

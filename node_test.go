package carryover

import "testing"

// TestNodeLoadRoom: what counts as room when a node places a session.
func TestNodeLoadRoom(t *testing.T) {
	for _, tc := range []struct {
		l    NodeLoad
		free int
		room bool
	}{
		{NodeLoad{Live: 9}, -1, true},                         // no bound
		{NodeLoad{Live: 1, Capacity: 2}, 1, true},             // a free slot
		{NodeLoad{Live: 2, Capacity: 2, Idle: 1}, 0, true},    // an idle kernel to hibernate
		{NodeLoad{Live: 2, Capacity: 2}, 0, false},            // every kernel busy
		{NodeLoad{Live: 1, Capacity: 2, Queued: 1}, 0, false}, // the free slot is promised
		{NodeLoad{Live: 2, Capacity: 2, Queued: 1, Idle: 1}, 0, false},
	} {
		if f, r := tc.l.Free(), tc.l.HasRoom(); f != tc.free || r != tc.room {
			t.Errorf("%+v: free %d room %v, want %d %v", tc.l, f, r, tc.free, tc.room)
		}
	}
}

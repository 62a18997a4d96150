package session

import (
	"testing"

	"github.com/carryover/carryover/kernel"
)

// A nil listing (the kernel dying, its box killing the rest) keeps what the last sample saw, so the
// death still names them; an empty one (alive, nothing in the background) replaces it.
func TestNoteBackgroundKeepsWhatADyingKernelHad(t *testing.T) {
	var ls Session
	k := new(kernel.Kernel)
	had := []kernel.BackgroundProcess{{PID: 14, Command: "sleep 1000"}}
	ls.noteBackground(k, had)
	ls.noteBackground(k, nil)
	if len(ls.bgSeen) != 1 || ls.bgSeen[0].PID != 14 || ls.bgKernel != k {
		t.Fatalf("after a dying kernel's nil listing: %+v", ls.bgSeen)
	}
	ls.noteBackground(k, []kernel.BackgroundProcess{})
	if ls.bgSeen == nil || len(ls.bgSeen) != 0 {
		t.Fatalf("after an empty listing: %+v, want none", ls.bgSeen)
	}
}

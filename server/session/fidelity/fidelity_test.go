package fidelity

import (
	"testing"

	"github.com/carryover/carryover/kernel"
)

// A nil listing (the kernel dying, its box killing the rest) keeps what the last sample saw, so the
// death still names them; an empty one (alive, nothing in the background) replaces it.
func TestBackgroundKeepsWhatADyingKernelHad(t *testing.T) {
	var n Notes
	k := new(kernel.Kernel)
	had := []kernel.BackgroundProcess{{PID: 14, Command: "sleep 1000"}}
	n.Background(k, had)
	n.Background(k, nil)
	if len(n.bgSeen) != 1 || n.bgSeen[0].PID != 14 || n.bgKernel != k || !n.HasBackground() {
		t.Fatalf("after a dying kernel's nil listing: %+v", n.bgSeen)
	}
	n.Background(k, []kernel.BackgroundProcess{})
	if n.bgSeen == nil || len(n.bgSeen) != 0 || n.HasBackground() {
		t.Fatalf("after an empty listing: %+v, want none", n.bgSeen)
	}
}

// What Ended and Restored keep is handed over once.
func TestTakeForgets(t *testing.T) {
	var n Notes
	n.Ended([]kernel.BackgroundProcess{{PID: 1}})
	n.Ended([]kernel.BackgroundProcess{{PID: 2}})
	if got := n.TakeEnded(); len(got) != 2 || got[1].PID != 2 {
		t.Fatalf("TakeEnded = %+v", got)
	}
	if got := n.TakeEnded(); got != nil {
		t.Fatalf("a second TakeEnded = %+v, want nothing", got)
	}
	if n.TakeRestored() != nil {
		t.Fatal("a report with no restore")
	}
}

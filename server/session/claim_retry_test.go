package session

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// TestClaimStartsAgainAfterAKernelDiedStarting: a kernel that dies while it starts (a heartbeat
// lost on a loaded node) held no session's state, so the claim starts another once instead of
// answering 500 at once; a second failure is the answer, and no third start is made.
func TestClaimStartsAgainAfterAKernelDiedStarting(t *testing.T) {
	s, _, prov := testService(t, nil)
	second := errors.New("second start refused")
	var launches atomic.Int32
	prov.LaunchFn = func(context.Context, kernel.LaunchSpec) (kernel.KernelProcess, error) {
		if launches.Add(1) == 1 {
			return nil, &kernel.DiedError{PID: 1, ExitCode: -1, Reason: "heartbeat lost"}
		}
		return nil, second
	}
	_, err := s.RunEphemeral(context.Background(), EphemeralRequest{Code: "1+1"})
	if err == nil || !strings.Contains(err.Error(), second.Error()) {
		t.Fatalf("RunEphemeral: %v, want the second start's error", err)
	}
	wantCode(t, err, carryover.CodeInternal)
	if n := launches.Load(); n != 2 {
		t.Fatalf("%d kernel starts, want 2 (one more after the one that died)", n)
	}
}

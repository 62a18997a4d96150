package session

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/mock"
)

func commMsg(t *testing.T, typ string, content map[string]any) kernel.RawMessage {
	t.Helper()
	h, _ := json.Marshal(map[string]any{"msg_id": "m-" + typ, "msg_type": typ})
	c, _ := json.Marshal(content)
	return kernel.RawMessage{Channel: "shell", Header: h, Content: c}
}

// TestSendInLineRefusesAClosedSession: a Jupyter client's shell request to a closed session (no
// kernel) is refused with the session's code, and no kernel is launched to take it.
func TestSendInLineRefusesAClosedSession(t *testing.T) {
	s, _, prov := testService(t, nil)
	launched := 0
	prov.LaunchFn = func(context.Context, kernel.LaunchSpec) (kernel.KernelProcess, error) {
		launched++
		return nil, mock.ErrNoKernels
	}
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	if _, err := s.Stop(context.Background(), "x", "test"); err != nil {
		t.Fatal(err)
	}
	msg := commMsg(t, "kernel_info_request", map[string]any{})
	err := handleOf(t, s, "x").SendInLine(context.Background(), msg, func(*kernel.Kernel) { t.Error("onKernel called") })
	if carryover.ErrorOf(err).Code != carryover.CodeSessionClosed || launched != 0 {
		t.Fatalf("SendInLine on a closed session: %v, %d launches; want session_closed and none", err, launched)
	}
}

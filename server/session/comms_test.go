package session

import (
	"context"
	"encoding/json"
	"strings"
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

// TestCommSetNamesLostComms: the comms open when a kernel is replaced are the lost ones (closed ones
// and the first kernel's start lose nothing), named with their widget model when they have one.
func TestCommSetNamesLostComms(t *testing.T) {
	var cs CommSet
	k1, k2, k3 := new(kernel.Kernel), new(kernel.Kernel), new(kernel.Kernel)
	if lost := cs.Switch(k1); lost != nil {
		t.Fatalf("the first kernel lost %v", lost)
	}
	cs.Observe(commMsg(t, "comm_open", map[string]any{"comm_id": "b", "target_name": "jupyter.widget",
		"data": map[string]any{"state": map[string]any{"_model_name": "IntSliderModel"}}}))
	cs.Observe(commMsg(t, "comm_open", map[string]any{"comm_id": "a", "target_name": "echo"}))
	cs.Observe(commMsg(t, "comm_open", map[string]any{"comm_id": "c", "target_name": "echo"}))
	cs.Observe(commMsg(t, "comm_close", map[string]any{"comm_id": "c"}))
	cs.Observe(commMsg(t, "execute_request", map[string]any{"comm_id": "d"}))
	if lost := cs.Switch(k1); lost != nil {
		t.Fatalf("the same kernel lost %v", lost)
	}
	lost := cs.Switch(k2)
	if len(lost) != 2 || lost[0].ID != "a" || lost[1].ID != "b" || lost[1].Model != "IntSliderModel" {
		t.Fatalf("lost %+v, want a and b (the slider)", lost)
	}
	text := LostCommsText(lost)
	if !strings.Contains(text, "IntSliderModel (jupyter.widget b)") || !strings.Contains(text, "echo a") {
		t.Fatalf("notice %q does not name both comms", text)
	}
	if lost := cs.Switch(k3); lost != nil || LostCommsText(lost) != "" {
		t.Fatalf("a kernel with no comms open lost %v", lost)
	}
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
	err := s.SendInLine(context.Background(), "x", msg, func(*kernel.Kernel) { t.Error("onKernel called") })
	if carryover.ErrorOf(err).Code != carryover.CodeSessionClosed || launched != 0 {
		t.Fatalf("SendInLine on a closed session: %v, %d launches; want session_closed and none", err, launched)
	}
}

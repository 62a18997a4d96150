package kernel

import (
	"encoding/json"
	"strings"
	"testing"
)

func commMsg(t *testing.T, typ string, content map[string]any) RawMessage {
	t.Helper()
	h, _ := json.Marshal(map[string]any{"msg_id": "m-" + typ, "msg_type": typ})
	c, _ := json.Marshal(content)
	return RawMessage{Channel: "shell", Header: h, Content: c}
}

// TestCommSetNamesLostComms: the comms open when a kernel is replaced are the lost ones (closed ones
// and the first kernel's start lose nothing), named with their widget model when they have one.
func TestCommSetNamesLostComms(t *testing.T) {
	var cs CommSet
	k1, k2, k3 := new(Kernel), new(Kernel), new(Kernel)
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

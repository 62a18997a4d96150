package stream

import (
	"encoding/json"
	"testing"

	"github.com/carryover/carryover/kernel"
)

// iopub builds a kernel iopub message of type t, parented to a message of type parentType.
func iopub(t, parentID, parentType, content string) kernel.RawMessage {
	return kernel.RawMessage{
		Header:       json.RawMessage(`{"msg_id":"k-` + t + `","msg_type":"` + t + `"}`),
		ParentHeader: json.RawMessage(`{"msg_id":"` + parentID + `","msg_type":"` + parentType + `"}`),
		Metadata:     json.RawMessage(`{}`),
		Content:      json.RawMessage(content),
	}
}

func setMsgID(commID, msgID string) string {
	return `{"comm_id":"` + commID + `","data":{"method":"update","state":{"msg_id":"` + msgID + `"},"buffers":[]}}`
}

// An Output widget's `with out:` inside a client's comm_msg handler: the relay sends the comm
// messages on, the outputs made while the widget captures as comm_output frames for that widget
// (innermost capture first), the handler's other outputs nowhere, and the idle status as comm_idle.
func TestCommRelayRoutesCapturedOutputs(t *testing.T) {
	var r CommRelay
	printed := func(text string) kernel.RawMessage {
		return iopub("stream", "ui-1", "comm_msg", `{"name":"stdout","text":"`+text+`"}`)
	}
	if f := r.Frame(printed("before")); f != nil {
		t.Fatalf("an output no widget captures became %#v", f)
	}
	f := r.Frame(iopub("comm_msg", "ui-1", "comm_msg", setMsgID("out-a", "ui-1")))
	if cf, ok := f.(CommFrame); !ok || cf.MsgType != "comm_msg" || cf.ParentMsgID != "ui-1" {
		t.Fatalf("comm_msg became %#v", f)
	}
	r.Frame(iopub("comm_msg", "ui-1", "comm_msg", setMsgID("out-b", "ui-1"))) // nested: b inside a
	if f, ok := r.Frame(printed("inner")).(*CommOutputFrame); !ok || f.CommID != "out-b" || f.Output.Text != "inner" {
		t.Fatalf("inner output: %#v", f)
	}
	r.Frame(iopub("comm_msg", "ui-1", "comm_msg", setMsgID("out-b", "")))
	if f, ok := r.Frame(printed("outer")).(*CommOutputFrame); !ok || f.CommID != "out-a" || f.ParentMsgID != "ui-1" {
		t.Fatalf("outer output: %#v", f)
	}
	if f, ok := r.Frame(iopub("status", "ui-1", "comm_msg", `{"execution_state":"idle"}`)).(CommIdleFrame); !ok || f.ParentMsgID != "ui-1" {
		t.Fatalf("idle: %#v", f)
	}
	if f := r.Frame(printed("after the handler")); f != nil {
		t.Fatalf("a capture outlived its handler: %#v", f)
	}
	// a cell's outputs are the run's (cellOptions captures those), never the relay's
	r.Frame(iopub("comm_msg", "cell-1", "execute_request", setMsgID("out-a", "cell-1")))
	if f := r.Frame(iopub("stream", "cell-1", "execute_request", `{"name":"stdout","text":"x"}`)); f != nil {
		t.Fatalf("a cell's output went through the relay: %#v", f)
	}
	if f := r.Frame(iopub("status", "cell-1", "execute_request", `{"execution_state":"idle"}`)); f != nil {
		t.Fatalf("a cell's status went through the relay: %#v", f)
	}
	// a kernel restarted in place says "starting": the page's widgets are gone
	if f, ok := r.Frame(iopub("status", "", "", `{"execution_state":"starting"}`)).(CommResetFrame); !ok || f.Message == "" {
		t.Fatalf("starting: %#v", f)
	}
}

// A cell's capture starts only while a client that draws widgets is connected: an API client alone
// keeps the outputs in the run's answer.
func TestOutputCaptureNeedsAWidgetClient(t *testing.T) {
	drawing := false
	c := OutputCaptures{When: func() bool { return drawing }}
	c.Watch(json.RawMessage(setMsgID("out-a", "cell-1")))
	if f := c.Frame(kernel.Output{Type: "stream", Text: "x"}); f != nil {
		t.Fatalf("captured with no widget client: %#v", f)
	}
	drawing = true
	c.Watch(json.RawMessage(setMsgID("out-a", "cell-1")))
	if f := c.Frame(kernel.Output{Type: "stream", Text: "x"}); f == nil || f.CommID != "out-a" {
		t.Fatalf("not captured with a widget client: %#v", f)
	}
}

package stream

import (
	"encoding/json"

	"github.com/carryover/carryover/kernel"
)

// comms.go: what a kernel's comm traffic becomes on the stream (the session relays it: its
// comm_relay.go), and which outputs an Output widget captures.

// CommRelay is the state of one kernel's relay: which Output widgets capture the outputs of which
// client comm_msg (an interact callback's `with out:`).
type CommRelay struct {
	captures OutputCaptures
}

// Frame is what iopub message m becomes on the stream, or nil. Outputs parented to a cell's
// execute_request are the run's (the session's cellOptions routes the captured ones); here only
// those parented to
// a comm_msg count, and only when an Output widget captures them (Jupyter frontends show a comm
// handler's other outputs nowhere either).
func (r *CommRelay) Frame(m kernel.RawMessage) any {
	var parent struct {
		MsgID   string `json:"msg_id"`
		MsgType string `json:"msg_type"`
	}
	_ = json.Unmarshal(m.ParentHeader, &parent)
	switch t := m.Type(); t {
	case "comm_open", "comm_msg", "comm_close":
		var hdr struct {
			MsgID string `json:"msg_id"`
		}
		_ = json.Unmarshal(m.Header, &hdr)
		if t == "comm_msg" && parent.MsgType == "comm_msg" {
			r.captures.Watch(m.Content)
		}
		return CommFrame{Type: "comm", MsgType: t, MsgID: hdr.MsgID, ParentMsgID: parent.MsgID,
			Content: m.Content, Metadata: m.Metadata, Buffers: m.Buffers}
	case "status":
		if m.ExecutionState() == "starting" { // a restart in place (Kernel.Restart): a new process, no comms
			r.captures.stack = nil
			return CommResetFrame{Type: "comm_reset", Message: "the kernel restarted: widgets drawn before have no state any more (run their cells again)"}
		}
		if parent.MsgType == "comm_msg" && m.ExecutionState() == "idle" {
			r.captures.stack = nil // the handler is done: no capture outlives it
			return CommIdleFrame{Type: "comm_idle", ParentMsgID: parent.MsgID}
		}
		return nil
	default:
		if parent.MsgType != "comm_msg" {
			return nil
		}
		out, ok := m.Output()
		if !ok {
			return nil
		}
		if f := r.captures.Frame(out); f != nil {
			return f
		}
		return nil // not a typed nil in the interface: the caller broadcasts what is not nil
	}
}

// OutputCaptures follows the ipywidgets Output widgets capturing now, innermost last: `with out:`
// sets the widget's msg_id state to the message being handled (a cell's execute_request, a client's
// comm_msg) and back to "" on exit; Jupyter frontends then show that message's outputs in the widget
// instead of the cell. The tracker sees the widget's comm_msg in order with the outputs, so each
// output goes to the widget capturing when it was made.
//
// Only while a client that draws widgets is connected (a websocket with ?comms=true) does a capture
// start: an API client alone keeps every output in the run's answer, as before widgets had a
// frontend here. When is nil for the relay (a comm_msg comes from such a client anyway).
type OutputCaptures struct {
	stack []capture
	When  func() bool
}

type capture struct{ commID, msgID string }

// Watch reads one comm_msg the kernel sent; an "update" of msg_id starts or ends a capture.
func (c *OutputCaptures) Watch(content json.RawMessage) {
	var m struct {
		CommID string `json:"comm_id"`
		Data   struct {
			Method string `json:"method"`
			State  struct {
				MsgID *string `json:"msg_id"`
			} `json:"state"`
		} `json:"data"`
	}
	if json.Unmarshal(content, &m) != nil || m.Data.Method != "update" || m.Data.State.MsgID == nil || m.CommID == "" {
		return
	}
	kept := c.stack[:0]
	for _, x := range c.stack {
		if x.commID != m.CommID {
			kept = append(kept, x)
		}
	}
	c.stack = kept
	if id := *m.Data.State.MsgID; id != "" && (c.When == nil || c.When()) {
		c.stack = append(c.stack, capture{commID: m.CommID, msgID: id})
	}
}

// Frame is out as a comm_output frame for the widget capturing it, or nil when none is.
func (c *OutputCaptures) Frame(out kernel.Output) *CommOutputFrame {
	if len(c.stack) == 0 {
		return nil
	}
	top := c.stack[len(c.stack)-1]
	return &CommOutputFrame{Type: "comm_output", CommID: top.commID, ParentMsgID: top.msgID, Output: out}
}

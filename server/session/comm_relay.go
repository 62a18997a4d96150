package session

// comm_relay.go relays Jupyter comm messages between a session's kernel and its stream's subscribers
// (the browser UI's widget manager): the kernel's comm_open, comm_msg and comm_close go out as
// "comm" frames, with their binary buffers; a client's go to the kernel's shell through SendComm.
// The outputs an Output widget captures (`with out:`, interact's callbacks) go out as
// "comm_output" frames instead of the cell's: those of a cell through the run (cellOptions, in
// order with its outputs), those of a client's comm_msg through the relay. Comms live in the kernel: a new kernel (a wake, a restart after a death, a
// rotation) has none, and the relay says so with a "comm_reset" frame.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// WantComms has sub receive the comm relay's frames (a websocket opened with ?comms=true: the
// browser UI). Other clients never see them.
func (s *Subscriber) WantComms() { s.comms.Store(true) }

// hasComms says whether some subscriber wants comm frames.
func (h *hub) hasComms() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if sub.comms.Load() {
			return true
		}
	}
	return false
}

// broadcastComms sends v (marshalled once) to the subscribers that want comm frames.
func (h *hub) broadcastComms(v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var frame []byte
	for sub := range h.subs {
		if !sub.comms.Load() {
			continue
		}
		if frame == nil {
			var err error
			if frame, err = json.Marshal(v); err != nil {
				return
			}
		}
		sub.send(frame)
	}
}

// CommFrame is one comm message between the kernel and a client, on the session's stream (kernel ->
// client) or the websocket (client -> kernel, where Content's comm_id, data, target_name are given).
type CommFrame struct {
	Type        string          `json:"type"`     // "comm"
	MsgType     string          `json:"msg_type"` // comm_open, comm_msg or comm_close
	MsgID       string          `json:"msg_id"`
	ParentMsgID string          `json:"parent_msg_id,omitempty"`
	Content     json.RawMessage `json:"content"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	Buffers     [][]byte        `json:"buffers,omitempty"` // base64 in JSON
}

// CommOutputFrame is an output an Output widget captured (see outputCaptures): ParentMsgID is the
// message whose handling printed it (a cell's execute_request or a client's comm_msg).
type CommOutputFrame struct {
	Type        string        `json:"type"`    // "comm_output"
	CommID      string        `json:"comm_id"` // the Output widget's model
	ParentMsgID string        `json:"parent_msg_id"`
	Output      kernel.Output `json:"output"`
}

// CommIdleFrame says the kernel is done with a client's comm_msg (its handler returned): a widget
// manager sends a model's next update only then, as Jupyter's does.
type CommIdleFrame struct {
	Type        string `json:"type"` // "comm_idle"
	ParentMsgID string `json:"parent_msg_id"`
}

// CommResetFrame says the session's kernel is new: the widgets drawn so far have no model any more.
type CommResetFrame struct {
	Type    string `json:"type"` // "comm_reset"
	Message string `json:"message"`
}

// CommRequest is what a client sends to the kernel: a comm_open, comm_msg or comm_close.
type CommRequest struct {
	MsgType  string          // comm_open, comm_msg or comm_close
	MsgID    string          // the client's, so it can tell the outputs its message causes; "" makes one
	Content  json.RawMessage // {"comm_id", "data", "target_name"?}
	Metadata json.RawMessage
	Buffers  [][]byte
}

// commMsgID makes a message id for a comm message the client did not name.
func commMsgID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "comm-" + hex.EncodeToString(b)
}

// maxCommBuffers bounds the binary parts of one client comm message (the websocket's read limit
// bounds their size).
const maxCommBuffers = 64

// SendComm sends a client's comm message to session id's live kernel. It does not wait for the run
// lock (a slider moves while a cell runs; the kernel queues it) and starts no kernel: a session
// without a live kernel has no comms, which is a conflict.
func (s *Service) SendComm(ctx context.Context, id string, req CommRequest) (msgID string, err error) {
	switch req.MsgType {
	case "comm_open", "comm_msg", "comm_close":
	default:
		return "", carryover.Errorf(carryover.CodeInvalid, "msg_type must be comm_open, comm_msg or comm_close, not %q", req.MsgType)
	}
	var c struct {
		CommID     string `json:"comm_id"`
		TargetName string `json:"target_name"`
	}
	if len(req.Content) == 0 || json.Unmarshal(req.Content, &c) != nil || c.CommID == "" {
		return "", carryover.Errorf(carryover.CodeInvalid, "a comm message's content must be a JSON object with a comm_id")
	}
	if req.MsgType == "comm_open" && c.TargetName == "" {
		return "", carryover.Errorf(carryover.CodeInvalid, "comm_open needs a target_name")
	}
	if len(req.Buffers) > maxCommBuffers {
		return "", carryover.Errorf(carryover.CodeInvalid, "a comm message carries at most %d buffers", maxCommBuffers)
	}
	if len(req.Metadata) == 0 {
		req.Metadata = json.RawMessage("{}")
	}
	ls, err := s.get(id)
	if err != nil {
		return "", err
	}
	ls.mu.Lock()
	k := ls.kern
	ls.mu.Unlock()
	if k == nil {
		return "", carryover.Errorf(carryover.CodeConflict,
			"session %q has no live kernel: widgets live in the kernel that drew them (run the cell again)", id)
	}
	if req.MsgID == "" {
		req.MsgID = commMsgID()
	}
	hdr, _ := json.Marshal(map[string]string{"msg_id": req.MsgID, "msg_type": req.MsgType, "username": "carryover",
		"session": "carryover-comms-" + id, "date": time.Now().UTC().Format(time.RFC3339Nano), "version": "5.3"})
	err = k.SendRaw(ctx, "shell", kernel.RawMessage{Header: hdr, Content: req.Content, Metadata: req.Metadata, Buffers: req.Buffers})
	if err != nil {
		return "", fmt.Errorf("comm to the kernel: %w", err)
	}
	if req.MsgType == "comm_msg" {
		ls.widgetsMoved(k) // widget_checkpoint.go: saved without a cell
	}
	return req.MsgID, nil
}

// relayComms forwards k's comm traffic to ls's subscribers until k dies. It runs once per kernel
// attached to the session (ensureKernelWith), and first tells clients that earlier widgets are gone.
func (ls *liveSession) relayComms(k *kernel.Kernel) {
	s := ls.svc
	msgs, cancel, err := k.Subscribe("iopub")
	if err != nil {
		s.log.Warn("comm relay", "session", ls.id, "err", err)
		return
	}
	defer cancel()
	ls.hub.broadcastComms(CommResetFrame{Type: "comm_reset",
		Message: "a new kernel started: the widgets come back from the last checkpoint"})
	if ls.hub.hasComms() {
		go ls.syncWidgets(context.Background(), k, ls.hub.broadcastComms) // widget_sync.go: the restore re-created them
	}
	var r commRelay
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if f := r.frame(m); f != nil {
				ls.hub.broadcastComms(f)
			}
		case <-k.Dead():
			return
		}
	}
}

// commRelay is the state of one kernel's relay: which Output widgets capture the outputs of which
// client comm_msg (an interact callback's `with out:`).
type commRelay struct {
	captures outputCaptures
}

// frame is what iopub message m becomes on the stream, or nil. Outputs parented to a cell's
// execute_request are the run's (cellOptions routes the captured ones); here only those parented to
// a comm_msg count, and only when an Output widget captures them (Jupyter frontends show a comm
// handler's other outputs nowhere either).
func (r *commRelay) frame(m kernel.RawMessage) any {
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
			r.captures.watch(m.Content)
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
		if f := r.captures.frame(out); f != nil {
			return f
		}
		return nil // not a typed nil in the interface: the caller broadcasts what is not nil
	}
}

// outputCaptures follows the ipywidgets Output widgets capturing now, innermost last: `with out:`
// sets the widget's msg_id state to the message being handled (a cell's execute_request, a client's
// comm_msg) and back to "" on exit; Jupyter frontends then show that message's outputs in the widget
// instead of the cell. The tracker sees the widget's comm_msg in order with the outputs, so each
// output goes to the widget capturing when it was made.
//
// Only while a client that draws widgets is connected (a websocket with ?comms=true) does a capture
// start: an API client alone keeps every output in the run's answer, as before widgets had a
// frontend here. when is nil for the relay (a comm_msg comes from such a client anyway).
type outputCaptures struct {
	stack []capture
	when  func() bool
}

type capture struct{ commID, msgID string }

// watch reads one comm_msg the kernel sent; an "update" of msg_id starts or ends a capture.
func (c *outputCaptures) watch(content json.RawMessage) {
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
	if id := *m.Data.State.MsgID; id != "" && (c.when == nil || c.when()) {
		c.stack = append(c.stack, capture{commID: m.CommID, msgID: id})
	}
}

// frame is out as a comm_output frame for the widget capturing it, or nil when none is.
func (c *outputCaptures) frame(out kernel.Output) *CommOutputFrame {
	if len(c.stack) == 0 {
		return nil
	}
	top := c.stack[len(c.stack)-1]
	return &CommOutputFrame{Type: "comm_output", CommID: top.commID, ParentMsgID: top.msgID, Output: out}
}

// Package comms is the session's side of the Jupyter comms a page's widget manager shares with the
// kernel: a client's comm message checked and made a kernel message (Request), and the kernel's live
// widgets listed as comm_open frames for a page that connects or after a restore (Live). The relay
// of the kernel's comm traffic itself turns messages into frames in package stream; the session
// service (comm_relay.go, widget_sync.go) runs both. Imports nothing of the service.
package comms

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/stream"
)

// Request is what a client sends to the kernel: a comm_open, comm_msg or comm_close.
type Request struct {
	MsgType  string          // comm_open, comm_msg or comm_close
	MsgID    string          // the client's, so it can tell the outputs its message causes; "" makes one
	Content  json.RawMessage // {"comm_id", "data", "target_name"?}
	Metadata json.RawMessage
	Buffers  [][]byte
}

// maxBuffers bounds the binary parts of one client comm message (the websocket's read limit
// bounds their size).
const maxBuffers = 64

// Check refuses a malformed message (invalid): another type, content without a comm_id, a
// comm_open without a target, too many buffers.
func (req Request) Check() error {
	switch req.MsgType {
	case "comm_open", "comm_msg", "comm_close":
	default:
		return carryover.Errorf(carryover.CodeInvalid, "msg_type must be comm_open, comm_msg or comm_close, not %q", req.MsgType)
	}
	var c struct {
		CommID     string `json:"comm_id"`
		TargetName string `json:"target_name"`
	}
	if len(req.Content) == 0 || json.Unmarshal(req.Content, &c) != nil || c.CommID == "" {
		return carryover.Errorf(carryover.CodeInvalid, "a comm message's content must be a JSON object with a comm_id")
	}
	if req.MsgType == "comm_open" && c.TargetName == "" {
		return carryover.Errorf(carryover.CodeInvalid, "comm_open needs a target_name")
	}
	if len(req.Buffers) > maxBuffers {
		return carryover.Errorf(carryover.CodeInvalid, "a comm message carries at most %d buffers", maxBuffers)
	}
	return nil
}

// Message is a checked request as the shell message session sessionID sends its kernel, and its
// message id (the client's, or a new one).
func (req Request) Message(sessionID string) (kernel.RawMessage, string) {
	if len(req.Metadata) == 0 {
		req.Metadata = json.RawMessage("{}")
	}
	if req.MsgID == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		req.MsgID = "comm-" + hex.EncodeToString(b)
	}
	hdr, _ := json.Marshal(map[string]string{"msg_id": req.MsgID, "msg_type": req.MsgType, "username": "carryover",
		"session": "carryover-comms-" + sessionID, "date": time.Now().UTC().Format(time.RFC3339Nano), "version": "5.3"})
	return kernel.RawMessage{Header: hdr, Content: req.Content, Metadata: req.Metadata, Buffers: req.Buffers}, req.MsgID
}

// model is one live widget as the agent's "widgets" op lists it (children before parents).
type model struct {
	CommID  string          `json:"comm_id"`
	Data    json.RawMessage `json:"data"`
	Outputs json.RawMessage `json:"outputs,omitempty"`
}

// Live asks kernel k's agent for its live widgets (the caller holds the session's run lock, so it
// does not race a turn) and answers each as a comm_open frame. Widgets come back with a restore
// (the agent re-creates them with their model ids: persistence/agent/carryover_agent/widgetstate.py),
// but a page hears a widget's comm_open only while it listens. Such a frame says so in its metadata
// ("carryover_sync": true), with what its Output widget shows; a page that has the model ignores it.
func Live(ctx context.Context, k *kernel.Kernel) ([]stream.CommFrame, error) {
	var ans struct {
		Models []model `json:"models"`
	}
	if err := persistence.CallAgent(ctx, k, "widgets", map[string]any{}, &ans); err != nil {
		return nil, err
	}
	frames := make([]stream.CommFrame, 0, len(ans.Models))
	for _, m := range ans.Models {
		content, err := json.Marshal(map[string]any{"comm_id": m.CommID, "target_name": "jupyter.widget", "data": m.Data})
		if err != nil {
			continue
		}
		md := map[string]any{"carryover_sync": true}
		if len(m.Outputs) > 0 {
			md["outputs"] = m.Outputs
		}
		meta, _ := json.Marshal(md)
		frames = append(frames, stream.CommFrame{Type: "comm", MsgType: "comm_open", MsgID: "carryover-sync-" + m.CommID, Content: content, Metadata: meta})
	}
	return frames, nil
}

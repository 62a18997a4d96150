package httpapi

// ws_comm.go: the websocket's comm frames, the client half of the widget relay
// (server/session/comms.go): a client's comm_open, comm_msg or comm_close goes to the kernel; the
// kernel's come back on the session's stream as "comm" frames.

import (
	"context"
	"encoding/json"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session"
)

// wsCommFields are the fields of a comm frame: {"type": "comm", "msg_type", "msg_id"?, "content":
// {"comm_id", "data", "target_name"?}, "metadata"?, "buffers"?: [base64...]}.
type wsCommFields struct {
	MsgType  string          `json:"msg_type"`
	MsgID    string          `json:"msg_id"`
	Content  json.RawMessage `json:"content"`
	Metadata json.RawMessage `json:"metadata"`
	Buffers  [][]byte        `json:"buffers"`
}

// comm sends a client's comm message to the kernel; a refusal comes back as an error frame with the
// frame's msg_id as its id. Only a connection that asked for comms may send them.
func (c *wsClient) comm(ctx context.Context, f wsFrame) {
	if !c.comms {
		c.sendErr(f.MsgID, carryover.Errorf(carryover.CodeInvalid, "unknown frame type %q (comm frames need the websocket opened with ?comms=true)", f.Type))
		return
	}
	err := c.onSession(func(ls *session.Session) error {
		_, err := ls.SendComm(ctx, session.CommRequest{MsgType: f.MsgType, MsgID: f.MsgID,
			Content: f.Content, Metadata: f.Metadata, Buffers: f.Buffers})
		return err
	})
	if err != nil {
		c.sendErr(f.MsgID, err)
	}
}

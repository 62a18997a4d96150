package session

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/carryover/carryover"
)

// SendComm refuses what is not a comm message, and a session with no live kernel, with the API's
// codes; nothing reaches a kernel.
func TestSendCommRefusals(t *testing.T) {
	t.Parallel()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "comms"})
	ctx := context.Background()
	for _, req := range []CommRequest{
		{MsgType: "execute_request", Content: json.RawMessage(`{"comm_id":"a"}`)},
		{MsgType: "comm_msg"},
		{MsgType: "comm_msg", Content: json.RawMessage(`[1]`)},
		{MsgType: "comm_msg", Content: json.RawMessage(`{"data":{}}`)},
		{MsgType: "comm_open", Content: json.RawMessage(`{"comm_id":"a"}`)},
		{MsgType: "comm_msg", Content: json.RawMessage(`{"comm_id":"a"}`), Buffers: make([][]byte, maxCommBuffers+1)},
	} {
		_, err := handleOf(t, s, "comms").SendComm(ctx, req)
		wantCode(t, err, carryover.CodeInvalid)
	}
	_, err := handleOf(t, s, "comms").SendComm(ctx, CommRequest{MsgType: "comm_msg", Content: json.RawMessage(`{"comm_id":"a","data":{}}`)})
	wantCode(t, err, carryover.CodeConflict)
	_, err = s.Session("nope")
	wantCode(t, err, carryover.CodeNotFound)
}

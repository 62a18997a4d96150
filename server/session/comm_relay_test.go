package session

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/carryover/carryover"
)

// SendComm refuses a malformed message (comms.Request.Check's own test is in package comms) and a
// session with no live kernel, with the API's codes; nothing reaches a kernel.
func TestSendCommRefusals(t *testing.T) {
	t.Parallel()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "comms"})
	ctx := context.Background()
	_, err := handleOf(t, s, "comms").SendComm(ctx, CommRequest{MsgType: "execute_request", Content: json.RawMessage(`{"comm_id":"a"}`)})
	wantCode(t, err, carryover.CodeInvalid)
	_, err = handleOf(t, s, "comms").SendComm(ctx, CommRequest{MsgType: "comm_msg", Content: json.RawMessage(`{"comm_id":"a","data":{}}`)})
	wantCode(t, err, carryover.CodeConflict)
	_, err = s.Session("nope")
	wantCode(t, err, carryover.CodeNotFound)
}

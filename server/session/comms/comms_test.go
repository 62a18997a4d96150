package comms

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carryover/carryover"
)

// Check refuses what is not a comm message with the API's invalid code.
func TestCheck(t *testing.T) {
	for _, req := range []Request{
		{MsgType: "execute_request", Content: json.RawMessage(`{"comm_id":"a"}`)},
		{MsgType: "comm_msg"},
		{MsgType: "comm_msg", Content: json.RawMessage(`[1]`)},
		{MsgType: "comm_msg", Content: json.RawMessage(`{"data":{}}`)},
		{MsgType: "comm_open", Content: json.RawMessage(`{"comm_id":"a"}`)},
		{MsgType: "comm_msg", Content: json.RawMessage(`{"comm_id":"a"}`), Buffers: make([][]byte, maxBuffers+1)},
	} {
		if err := req.Check(); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("%+v: %v", req, err)
		}
	}
	for _, req := range []Request{
		{MsgType: "comm_open", Content: json.RawMessage(`{"comm_id":"a","target_name":"jupyter.widget"}`)},
		{MsgType: "comm_msg", Content: json.RawMessage(`{"comm_id":"a","data":{}}`), Buffers: make([][]byte, maxBuffers)},
		{MsgType: "comm_close", Content: json.RawMessage(`{"comm_id":"a"}`)},
	} {
		if err := req.Check(); err != nil {
			t.Errorf("%+v: %v", req, err)
		}
	}
}

// Message carries the client's id (or a new one), the session's name in its header and empty
// metadata as {}.
func TestMessage(t *testing.T) {
	content := json.RawMessage(`{"comm_id":"a","data":{}}`)
	msg, id := Request{MsgType: "comm_msg", MsgID: "mine", Content: content}.Message("s1")
	var hdr map[string]string
	if err := json.Unmarshal(msg.Header, &hdr); err != nil {
		t.Fatal(err)
	}
	if id != "mine" || hdr["msg_id"] != "mine" || hdr["msg_type"] != "comm_msg" || hdr["session"] != "carryover-comms-s1" ||
		string(msg.Metadata) != "{}" || string(msg.Content) != string(content) {
		t.Fatalf("message %s %s %s, id %q", msg.Header, msg.Metadata, msg.Content, id)
	}
	_, a := Request{MsgType: "comm_msg", Content: content}.Message("s1")
	_, b := Request{MsgType: "comm_msg", Content: content}.Message("s1")
	if !strings.HasPrefix(a, "comm-") || a == b {
		t.Fatalf("made ids %q, %q", a, b)
	}
}

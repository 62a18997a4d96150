package rawexec

import (
	"encoding/json"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// TestParseNormalizes: what ipykernel needs and a client may leave out is filled in (without
// "silent" it would answer nothing), stop_on_error is off, and a request without a string code or a
// msg_id is the client's mistake.
func TestParseNormalizes(t *testing.T) {
	req := kernel.RawMessage{Header: json.RawMessage(`{"msg_id":"m1"}`), Content: json.RawMessage(`{"code":"1+1","silent":null}`)}
	c, id, err := Parse(&req)
	if err != nil || id != "m1" || c.Code != "1+1" || c.Silent {
		t.Fatalf("Parse = %+v %q %v", c, id, err)
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(req.Content, &m)
	for k, want := range map[string]string{"silent": "false", "user_expressions": "{}", "allow_stdin": "false", "stop_on_error": "false"} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
	for _, bad := range []kernel.RawMessage{
		{Header: json.RawMessage(`{"msg_id":"m"}`), Content: json.RawMessage(`{"code":1}`)},
		{Header: json.RawMessage(`{"msg_id":"m"}`), Content: json.RawMessage(`[]`)},
		{Header: json.RawMessage(`{}`), Content: json.RawMessage(`{"code":""}`)},
	} {
		if _, _, err := Parse(&bad); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("Parse(%s, %s): %v, want invalid_request", bad.Header, bad.Content, err)
		}
	}
}

// TestUserExpressionRidesAndLeaves: the snapshot expression is added beside the client's own, and
// taken off the reply again, so the client sees only what it asked for.
func TestUserExpressionRidesAndLeaves(t *testing.T) {
	content, err := WithUserExpression(json.RawMessage(`{"code":"x","user_expressions":{"mine":"1"}}`), "snap", "2")
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		UserExpressions map[string]string `json:"user_expressions"`
	}
	if json.Unmarshal(content, &sent); sent.UserExpressions["mine"] != "1" || sent.UserExpressions["snap"] != "2" {
		t.Fatalf("sent %s", content)
	}
	reply := &kernel.RawMessage{Content: json.RawMessage(`{"status":"ok","execution_count":3,"user_expressions":{
		"mine":{"status":"ok","data":{"text/plain":"1"}},"snap":{"status":"ok","data":{"text/plain":"'answer'"}}}}`)}
	if got := StripUserExpression(reply, "snap"); got != "'answer'" {
		t.Errorf("snapshot answer %q", got)
	}
	var back struct {
		UserExpressions map[string]json.RawMessage `json:"user_expressions"`
	}
	if json.Unmarshal(reply.Content, &back); len(back.UserExpressions) != 1 || back.UserExpressions["mine"] == nil {
		t.Errorf("reply keeps %s", reply.Content)
	}
	if status, count := ReplyStatus(reply); status != "ok" || count != 3 {
		t.Errorf("ReplyStatus = %q %d", status, count)
	}
}

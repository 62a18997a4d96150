package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/client"
)

// A websocket gets the comm relay only when it asks (?comms=true): then a widget's comm_open comes
// from the kernel, the client's comm_msg reaches the kernel's handler, and the handler's answer comes
// back; without it, comm frames are refused and none is sent to it. No live kernel is a conflict.
func TestWebsocketComms(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "cm"})
	dial := func(q string) *websocket.Conn {
		u := strings.Replace(ts.base, "http://", "ws://", 1) + "/api/sessions/cm/ws?token=" + testToken + q
		c, _, err := websocket.DefaultDialer.Dial(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	read := func(c *websocket.Conn, want func(map[string]any) bool) map[string]any {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		for {
			var f map[string]any
			if err := c.ReadJSON(&f); err != nil {
				t.Fatalf("reading frames: %v", err)
			}
			if want(f) {
				return f
			}
		}
	}
	plain, comms := dial(""), dial("&comms=true")
	msg := map[string]any{"type": "comm", "msg_type": "comm_msg", "msg_id": "m1", "content": map[string]any{"comm_id": "x", "data": map[string]any{}}}
	if err := comms.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
	f := read(comms, func(f map[string]any) bool { return f["type"] == "error" })
	if e, _ := f["error"].(map[string]any); f["id"] != "m1" || e["code"] != "conflict" {
		t.Fatalf("a comm to a session with no kernel: %v", f)
	}
	if err := plain.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
	f = read(plain, func(f map[string]any) bool { return f["type"] == "error" })
	if e, _ := f["error"].(map[string]any); e["code"] != "invalid_request" {
		t.Fatalf("a comm without ?comms=true: %v", f)
	}
	// the kernel opens a comm; its handler echoes what the client sends
	ts.run("cm", "from ipykernel.comm import Comm\nc = Comm(target_name='carryover.test', data={'hello': 1})\n"+
		"c.on_msg(lambda m: c.send({'echo': m['content']['data']['n'] * 2}))")
	f = read(comms, func(f map[string]any) bool { return f["type"] == "comm" && f["msg_type"] == "comm_open" })
	content, _ := f["content"].(map[string]any)
	if content["target_name"] != "carryover.test" {
		t.Fatalf("comm_open: %v", f)
	}
	id := content["comm_id"].(string)
	msg = map[string]any{"type": "comm", "msg_type": "comm_msg", "msg_id": "m2", "content": map[string]any{"comm_id": id, "data": map[string]any{"n": 21}}}
	if err := comms.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
	f = read(comms, func(f map[string]any) bool { return f["type"] == "comm" && f["parent_msg_id"] == "m2" })
	b, _ := json.Marshal(f["content"])
	if !strings.Contains(string(b), `"echo":42`) {
		t.Fatalf("the handler's answer: %s", b)
	}
	read(comms, func(f map[string]any) bool { return f["type"] == "comm_idle" && f["parent_msg_id"] == "m2" })
	// the plain client saw none of it (the kernel's start sent comm_reset, its comm_open came during
	// the run): every frame it got up to the run's result is the run's
	_ = plain.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		var f map[string]any
		if err := plain.ReadJSON(&f); err != nil {
			t.Fatalf("reading the plain client's frames: %v", err)
		}
		if s, _ := f["type"].(string); strings.HasPrefix(s, "comm") {
			t.Fatalf("a client without ?comms=true got %v", f)
		}
		if f["type"] == "result" {
			break
		}
	}
}

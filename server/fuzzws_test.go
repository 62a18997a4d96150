package server_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// wsFuzzConn is a raw websocket to a session: every server frame read is checked against
// WSServerFrame, and error frames against the error codes.
type wsFuzzConn struct {
	f      *fuzzer
	conn   *websocket.Conn
	frames chan []byte
	// timeoutOK: some run frame asked for a tiny timeout, so a timeout error frame is its doing.
	timeoutOK bool
}

func (f *fuzzer) dialWS(id string) *wsFuzzConn {
	f.t.Helper()
	u := strings.Replace(f.ts.base, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws"
	d := websocket.Dialer{HandshakeTimeout: fuzzTimeout}
	conn, res, err := d.Dial(u, http.Header{"Authorization": {"Bearer " + testToken}})
	if err != nil {
		f.t.Fatalf("ws dial %s: %v (%v)", id, err, res)
	}
	c := &wsFuzzConn{f: f, conn: conn, frames: make(chan []byte, 1024)}
	go func() {
		defer close(c.frames)
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			c.frames <- data
		}
	}()
	return c
}

// check validates one server frame; it returns its type and id.
func (c *wsFuzzConn) check(what string, data []byte) (typ, id string) {
	f := c.f
	f.frames++
	if err := f.ac.validate("#/components/schemas/WSServerFrame", data); err != nil {
		f.t.Errorf("ws %s: server frame %v: %s", what, err, clip(data))
	}
	var fr struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &fr)
	if fr.Type == "error" {
		switch {
		case fr.Error.Message == "":
			f.t.Errorf("ws %s: error frame without a message: %s", what, clip(data))
		case f.ac.codes[fr.Error.Code] >= 500 && !(fr.Error.Code == "timeout" && c.timeoutOK):
			f.t.Errorf("ws %s: server error frame: %s", what, clip(data))
		}
	}
	return fr.Type, fr.ID
}

// until reads frames until one of type typ with id arrives; false when the connection closed.
func (c *wsFuzzConn) until(what, typ, id string) (bool, [][]byte) {
	var seen [][]byte
	deadline := time.After(fuzzTimeout)
	for {
		select {
		case data, ok := <-c.frames:
			if !ok {
				return false, seen
			}
			seen = append(seen, data)
			if os.Getenv("FUZZ_DEBUG") != "" {
				c.f.t.Logf("%s ws %s: %s", time.Now().Format("15:04:05.000"), what, clip(data))
			}
			if t, i := c.check(what, data); t == typ && i == id {
				return true, seen
			}
		case <-deadline:
			c.f.t.Errorf("ws %s: HUNG: no %s frame %q within %s", what, typ, id, fuzzTimeout)
			return false, seen
		}
	}
}

// wsFrame is one frame the fuzz sends: its message type and bytes, and whether the server may
// close the connection over it (a frame over the read limit).
type wsFuzzFrame struct {
	name     string
	msgType  int
	data     []byte
	mayClose bool
}

// fuzzWebsocket sends frames drawn from WSClientFrame and garbage to the running session's
// websocket, each followed by a ping that must be answered: the connection stays served.
func (f *fuzzer) fuzzWebsocket() {
	h := fnv.New64a()
	h.Write([]byte("websocket frames"))
	r := rand.New(rand.NewPCG(uint64(f.seed), h.Sum64()))
	gen := &schemaGen{doc: f.ac.doc, r: r, fields: safeFields()}
	frameSchemas := []string{"WSClientRunFrame", "WSClientInputReplyFrame", "WSClientInterruptFrame", "WSClientSubscribeEventsFrame", "WSClientPingFrame"}
	var frames []wsFuzzFrame
	text := func(name, s string) wsFuzzFrame {
		return wsFuzzFrame{name: name, msgType: websocket.TextMessage, data: []byte(s)}
	}
	for _, name := range frameSchemas {
		sch := map[string]any{"$ref": "#/components/schemas/" + name}
		valid := 3
		if name == "WSClientRunFrame" {
			valid = 2
		}
		for i := 0; i < valid; i++ {
			frames = append(frames, wsFuzzFrame{name: "valid " + name, msgType: websocket.TextMessage, data: mustJSON(gen.valid(sch, "", 0))})
		}
		for i := 0; i < 5; i++ {
			m := gen.invalid(sch, 1<<20)
			frames = append(frames, wsFuzzFrame{name: m.name + " " + name, msgType: websocket.TextMessage, data: m.body, mayClose: len(m.body) > 1<<20})
		}
	}
	big := strings.Repeat("z", 900<<10)
	frames = append(frames,
		text("not JSON", "hello"), text("empty", ""), text("null", "null"), text("array", "[1,2]"),
		text("unknown type", `{"type": "launch_missiles"}`), text("null type", `{"type": null}`),
		text("type array", `{"type": ["run"]}`), text("no type", `{"id": "x"}`),
		text("invalid UTF-8", "{\"type\": \"ping\", \"id\": \"\xff\xfe\"}"),
		text("run, code a number", `{"type": "run", "id": "r1", "code": 123}`),
		text("run, negative timeout", `{"type": "run", "id": "r2", "code": "1+1", "timeout_seconds": -1}`),
		text("run, zero timeout", `{"type": "run", "id": "r3", "code": "1+1", "timeout_seconds": 0}`),
		text("run, huge timeout", `{"type": "run", "id": "r4", "code": "1+1", "timeout_seconds": 1e308}`),
		text("run, overflowing timeout", `{"type": "run", "id": "r5", "code": "1+1", "timeout_seconds": 1e400}`),
		text("run, huge id", `{"type": "run", "id": "`+big+`", "code": "1+1", "timeout_seconds": -1}`),
		text("run, nested code", `{"type": "run", "id": "r6", "code": `+strings.Repeat("[", 50000)+strings.Repeat("]", 50000)+`}`),
		text("input_reply, unknown id", `{"type": "input_reply", "id": "nope", "value": "x"}`),
		text("subscribe_events, negative", `{"type": "subscribe_events", "after_sequence": -1}`),
		text("subscribe_events, huge", `{"type": "subscribe_events", "after_sequence": 1e20}`),
		text("subscribe_events, string", `{"type": "subscribe_events", "after_sequence": "x"}`),
		text("interrupt while idle", `{"type": "interrupt", "id": "i1"}`),
		wsFuzzFrame{name: "binary garbage", msgType: websocket.BinaryMessage, data: []byte{0, 1, 2, 0xff, 0xfe}},
		wsFuzzFrame{name: "binary ping", msgType: websocket.BinaryMessage, data: []byte(`{"type": "ping", "id": "bin"}`)},
		wsFuzzFrame{name: "frame over the read limit", msgType: websocket.TextMessage, data: []byte(`{"type": "ping", "id": "` + strings.Repeat("y", 2<<20) + `"}`), mayClose: true},
	)
	r.Shuffle(len(frames), func(i, j int) { frames[i], frames[j] = frames[j], frames[i] })

	c := f.dialWS(fuzzRunning)
	defer func() { c.conn.Close() }()
	for i, fr := range frames {
		what := fmt.Sprintf("frame %d (%s)", i, fr.name)
		if tinyTimeout(fr.data) {
			c.timeoutOK = true
		}
		frameStart := time.Now()
		_ = c.conn.SetWriteDeadline(time.Now().Add(fuzzTimeout))
		err := c.conn.WriteMessage(fr.msgType, fr.data)
		ping := fmt.Sprintf("fzp%d", i)
		if err == nil {
			err = c.conn.WriteMessage(websocket.TextMessage, []byte(`{"type": "ping", "id": "`+ping+`"}`))
		}
		ok := err == nil
		if ok {
			ok, _ = c.until(what, "pong", ping)
		}
		if d := time.Since(frameStart); d > time.Second {
			f.t.Logf("ws %s took %s", what, d.Round(time.Millisecond))
		}
		if !ok {
			if !fr.mayClose {
				f.t.Errorf("ws %s: the connection ended (%v)", what, err)
			}
			c.conn.Close()
			c = f.dialWS(fuzzRunning)
		}
	}
	// The connection still runs code: 1+1 answers 2.
	_ = c.conn.WriteMessage(websocket.TextMessage, []byte(`{"type": "run", "id": "fz-final", "code": "1+1"}`))
	finalStart := time.Now()
	ok, seen := c.until("final run", "result", "fz-final")
	f.t.Logf("ws final run answered in %s", time.Since(finalStart).Round(time.Millisecond))
	if !ok {
		f.t.Fatalf("ws: no result for the final run")
	}
	var res struct {
		Result struct {
			Result *string `json:"result"`
		} `json:"result"`
	}
	if err := json.Unmarshal(seen[len(seen)-1], &res); err != nil || res.Result.Result == nil || *res.Result.Result != "2" {
		f.t.Errorf("ws: final run answered %s", clip(seen[len(seen)-1]))
	}
}

package server_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/client"
)

// jmsg is a Jupyter message as the tests see it.
type jmsg struct {
	Channel      string          `json:"channel"`
	Header       map[string]any  `json:"header"`
	ParentHeader map[string]any  `json:"parent_header"`
	Metadata     map[string]any  `json:"metadata"`
	Content      map[string]any  `json:"content"`
	MsgID        string          `json:"msg_id"`
	MsgType      string          `json:"msg_type"`
	Buffers      [][]byte        `json:"-"`
	Raw          json.RawMessage `json:"-"`
}

func (m jmsg) parent() string { s, _ := m.ParentHeader["msg_id"].(string); return s }
func (m jmsg) typ() string    { s, _ := m.Header["msg_type"].(string); return s }

// jws is a channels websocket client speaking the v1 binary framing or the legacy JSON one.
type jws struct {
	t    *testing.T
	c    *websocket.Conn
	v1   bool
	seen []jmsg // everything received
	n    int
}

func dialJupyter(t *testing.T, base, kernelID string, v1 bool, token string) *jws {
	t.Helper()
	d := websocket.Dialer{}
	if v1 {
		d.Subprotocols = []string{"v1.kernel.websocket.jupyter.org"}
	}
	url := strings.Replace(base, "http", "ws", 1) + "/jupyter/api/kernels/" + kernelID + "/channels?session_id=abc&token=" + token
	c, res, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial channels: %v (%v)", err, res)
	}
	if v1 && c.Subprotocol() != "v1.kernel.websocket.jupyter.org" {
		t.Fatalf("subprotocol %q not echoed", c.Subprotocol())
	}
	t.Cleanup(func() { c.Close() })
	return &jws{t: t, c: c, v1: v1}
}

// openJupyterKernel starts a kernel through the Jupyter door of the server at base and dials its
// channels (v1 protocol); it returns the kernel's id and the connection.
func openJupyterKernel(t *testing.T, base string) (string, *jws) {
	t.Helper()
	var kern map[string]any
	if st := jreq(t, base, "POST", "/jupyter/api/kernels", `{"name":"python3"}`, &kern); st != 201 {
		t.Fatalf("POST kernels: %d", st)
	}
	kid := kern["id"].(string)
	return kid, dialJupyter(t, base, kid, true, testToken)
}

// send sends a request and returns its msg_id. The header's date is a number, as nbclient sends it.
func (w *jws) send(channel, msgType string, content map[string]any, buffers ...[]byte) string {
	w.n++
	return w.sendAs(fmt.Sprintf("req-%d-%d", time.Now().UnixNano(), w.n), channel, msgType, content, buffers...)
}

// sendAs sends a request with msg_id id (a client sending the same request again) and returns id.
func (w *jws) sendAs(id, channel, msgType string, content map[string]any, buffers ...[]byte) string {
	hdr := map[string]any{"msg_id": id, "msg_type": msgType, "username": "t", "session": "s1", "date": 1.7e9, "version": "5.3"}
	if w.v1 {
		parts := [][]byte{[]byte(channel), jsonOf(hdr), []byte("{}"), []byte("{}"), jsonOf(content)}
		parts = append(parts, buffers...)
		n := len(parts) + 1
		out := make([]byte, 8*(n+1))
		binary.LittleEndian.PutUint64(out, uint64(n))
		off := 8 * (n + 1)
		binary.LittleEndian.PutUint64(out[8:], uint64(off))
		for i, p := range parts {
			off += len(p)
			binary.LittleEndian.PutUint64(out[8*(i+2):], uint64(off))
		}
		for _, p := range parts {
			out = append(out, p...)
		}
		if err := w.c.WriteMessage(websocket.BinaryMessage, out); err != nil {
			w.t.Fatal(err)
		}
		return id
	}
	m := map[string]any{"header": hdr, "parent_header": map[string]any{}, "metadata": map[string]any{}, "content": content}
	if channel != "shell" { // a message without channel is shell
		m["channel"] = channel
	}
	if err := w.c.WriteMessage(websocket.TextMessage, jsonOf(m)); err != nil {
		w.t.Fatal(err)
	}
	return id
}

func jsonOf(v any) []byte { b, _ := json.Marshal(v); return b }

// recv reads one message (within 60 s).
func (w *jws) recv() jmsg {
	w.t.Helper()
	_ = w.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	typ, data, err := w.c.ReadMessage()
	if err != nil {
		w.t.Fatalf("reading the channels websocket: %v", err)
	}
	var m jmsg
	switch {
	case w.v1:
		if typ != websocket.BinaryMessage {
			w.t.Fatalf("v1: got a text frame %s", data)
		}
		n := binary.LittleEndian.Uint64(data)
		offs := make([]uint64, n)
		for i := range offs {
			offs[i] = binary.LittleEndian.Uint64(data[8*(i+1):])
		}
		part := func(i int) []byte { return data[offs[i]:offs[i+1]] }
		m.Channel = string(part(0))
		for i, dst := range []any{&m.Header, &m.ParentHeader, &m.Metadata, &m.Content} {
			if err := json.Unmarshal(part(i+1), dst); err != nil {
				w.t.Fatalf("v1 part %d: %v", i+1, err)
			}
		}
		for i := 5; i < int(n)-1; i++ {
			m.Buffers = append(m.Buffers, part(i))
		}
	case typ == websocket.TextMessage:
		if err := json.Unmarshal(data, &m); err != nil {
			w.t.Fatalf("legacy frame: %v", err)
		}
		m.Raw = data
		if m.MsgID != m.Header["msg_id"] || m.MsgType != m.typ() {
			w.t.Fatalf("legacy frame without top-level msg_id/msg_type: %s", data)
		}
	default:
		nb := binary.BigEndian.Uint32(data)
		offs := make([]int, nb+1)
		for i := 0; i < int(nb); i++ {
			offs[i] = int(binary.BigEndian.Uint32(data[4*(i+1):]))
		}
		offs[nb] = len(data)
		if err := json.Unmarshal(data[offs[0]:offs[1]], &m); err != nil {
			w.t.Fatalf("legacy binary frame: %v", err)
		}
		for i := 1; i < int(nb); i++ {
			m.Buffers = append(m.Buffers, data[offs[i]:offs[i+1]])
		}
	}
	w.seen = append(w.seen, m)
	return m
}

// execute runs code and returns its messages up to the idle with its parent (reply included).
func (w *jws) execute(code string) (reply jmsg, msgs []jmsg) {
	w.t.Helper()
	id := w.send("shell", "execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	return w.until(id)
}

// until reads until both the reply and the idle of request id came.
func (w *jws) until(id string) (reply jmsg, msgs []jmsg) {
	w.t.Helper()
	idle := false
	for reply.Header == nil || !idle {
		m := w.recv()
		if m.parent() != id {
			continue
		}
		msgs = append(msgs, m)
		if strings.HasSuffix(m.typ(), "_reply") {
			reply = m
		}
		if m.typ() == "status" && m.Content["execution_state"] == "idle" {
			if reply.Header == nil && strings.HasPrefix(m.ParentHeader["msg_type"].(string), "execute") {
				// Shell and iopub are two sockets: only a turn's order (reply, then idle after the
				// checkpoint) is carryover's to keep.
				w.t.Fatalf("idle before the reply of %s", id)
			}
			idle = true
		}
	}
	return reply, msgs
}

func stdoutOf(msgs []jmsg) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.typ() == "stream" {
			b.WriteString(m.Content["text"].(string))
		}
	}
	return b.String()
}

// jreq sends a request to the Jupyter REST API and decodes the answer into out (when not nil).
func jreq(t *testing.T, base, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "token "+testToken)
	req.Header.Set("X-XSRFToken", "ignored")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		_ = json.NewDecoder(res.Body).Decode(out)
	}
	return res.StatusCode
}

var jupyterTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

// TestJupyterREST: Jupyter Server's REST shapes, errors, auth forms, and sessions that outlive a
// restart of carryover (they are in the database).
func TestJupyterREST(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	var api map[string]any
	if jreq(t, ts.base, "GET", "/jupyter/api?_=123", "", &api) != 200 || api["version"] == nil {
		t.Fatalf("GET api: %v", api)
	}
	var specs struct {
		Default     string                    `json:"default"`
		Kernelspecs map[string]map[string]any `json:"kernelspecs"`
	}
	jreq(t, ts.base, "GET", "/jupyter/api/kernelspecs", "", &specs)
	spec, _ := specs.Kernelspecs["python3"]["spec"].(map[string]any)
	if specs.Default != "python3" || spec["language"] != "python" || spec["argv"] == nil || spec["display_name"] == nil || spec["metadata"] == nil {
		t.Fatalf("kernelspecs: %+v", specs)
	}
	var e map[string]any
	if st := jreq(t, ts.base, "GET", "/jupyter/api/kernelspecs/ruby", "", &e); st != 404 || e["message"] == nil {
		t.Fatalf("unknown kernelspec: %d %v", st, e)
	}
	if st := jreq(t, ts.base, "POST", "/jupyter/api/kernels", "{not json", &e); st != 400 || e["reason"] != "invalid_request" {
		t.Fatalf("bad body: %d %v", st, e)
	}
	if st := jreq(t, ts.base, "POST", "/jupyter/api/kernels", `{"name": 5}`, &e); st != 400 ||
		e["message"] != `request body: field "name" must be a string, not number` {
		t.Fatalf("a name that is a number: %d %v", st, e)
	}
	if st := jreq(t, ts.base, "GET", "/jupyter/api/kernels/00000000-0000-0000-0000-000000000000", "", &e); st != 404 {
		t.Fatalf("unknown kernel: %d", st)
	}
	res, _ := http.Get(ts.base + "/jupyter/api/kernels")
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Fatalf("no token: %d", res.StatusCode)
	}
	res, _ = http.Get(ts.base + "/jupyter/token/" + testToken + "/api/kernels")
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("token in the path: %d", res.StatusCode)
	}

	var sess map[string]any
	if st := jreq(t, ts.base, "POST", "/jupyter/api/sessions", `{"path":"a/b.ipynb","name":"b.ipynb","type":"notebook","kernel":{"name":"python3"}}`, &sess); st != 201 {
		t.Fatalf("POST sessions: %d %v", st, sess)
	}
	kern := sess["kernel"].(map[string]any)
	kid := kern["id"].(string)
	if !regexp.MustCompile(`^\w+-\w+-\w+-\w+-\w+$`).MatchString(kid) || !jupyterTime.MatchString(kern["last_activity"].(string)) ||
		kern["execution_state"] == nil || kern["connections"] == nil || kern["name"] != "python3" {
		t.Fatalf("kernel model: %v", kern)
	}
	sid := sess["id"].(string)
	if st := jreq(t, ts.base, "PATCH", "/jupyter/api/sessions/"+sid, `{"path":"a/renamed.ipynb"}`, &sess); st != 200 || sess["path"] != "a/renamed.ipynb" {
		t.Fatalf("PATCH: %d %v", st, sess)
	}
	ts = ts.restart()
	var list []map[string]any
	jreq(t, ts.base, "GET", "/jupyter/api/sessions", "", &list)
	if len(list) != 1 || list[0]["id"] != sid || list[0]["path"] != "a/renamed.ipynb" || list[0]["kernel"].(map[string]any)["id"] != kid {
		t.Fatalf("sessions after a restart: %v", list)
	}
	var kernels []map[string]any
	jreq(t, ts.base, "GET", "/jupyter/api/kernels", "", &kernels)
	if len(kernels) != 1 || kernels[0]["id"] != kid || kernels[0]["execution_state"] != "idle" {
		t.Fatalf("a hibernated kernel is listed idle after a restart: %v", kernels)
	}
	if st := jreq(t, ts.base, "DELETE", "/jupyter/api/sessions/"+sid, "", nil); st != 204 {
		t.Fatalf("DELETE session: %d", st)
	}
	jreq(t, ts.base, "GET", "/jupyter/api/sessions", "", &list)
	if len(list) != 0 {
		t.Fatalf("a deleted session is listed: %v", list)
	}
	if got := ts.session(kid); got.State != "completed" {
		t.Fatalf("Jupyter's DELETE closes the carryover session, it does not remove it: %+v", got)
	}
}

// TestJupyterChannels runs cells over both framings: the idle of a cell comes only once its
// checkpoint is committed, carryover's own executions (checkpoints, env, probes, carryover's API)
// never reach the Jupyter client, and a kernel killed mid-cell answers with an error reply and an
// idle, then continues with the state of the last checkpoint.
func TestJupyterChannels(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	for _, v1 := range []bool{true, false} {
		t.Run(fmt.Sprintf("v1=%v", v1), func(t *testing.T) {
			var kern map[string]any
			if st := jreq(t, ts.base, "POST", "/jupyter/api/kernels", `{"name":"python3"}`, &kern); st != 201 {
				t.Fatalf("POST kernels: %d %v", st, kern)
			}
			kid := kern["id"].(string)
			// carryover's own websocket clients (the UI) see the Jupyter client's visible turns.
			own, err := ts.c.Connect(context.Background(), kid)
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			w := dialJupyter(t, ts.base, kid, v1, testToken)
			ids := map[string]bool{}
			for i, code := range []string{"x = 40", "x += 1", "x += 1\nprint(x)"} {
				id := w.send("shell", "execute_request", map[string]any{"code": code, "silent": false, "store_history": true,
					"user_expressions": map[string]any{}, "allow_stdin": false})
				ids[id] = true
				reply, msgs := w.until(id)
				// At the idle, the turn's checkpoint is committed.
				doc := ts.session(kid)
				if doc.LastCheckpoint == nil || doc.LastCheckpoint.Turn != i+1 || reply.Content["execution_count"] != float64(i+1) {
					t.Fatalf("cell %d: idle came before its checkpoint: last_checkpoint %+v, reply %v", i+1, doc.LastCheckpoint, reply.Content)
				}
				if ue, _ := reply.Content["user_expressions"].(map[string]any); len(ue) != 0 {
					t.Fatalf("carryover's snapshot expression leaked into the reply: %v", ue)
				}
				if i == 2 && stdoutOf(msgs) != "42\n" {
					t.Fatalf("stdout %q", stdoutOf(msgs))
				}
			}
			checkOwnClientSawTurns(t, own, []string{"x = 40", "x += 1", "x += 1\nprint(x)"}, "42\n")
			// The turns' records keep their outputs, as runs' do: the history and the notebook show them.
			hist, err := ts.c.Executions(context.Background(), kid, 0)
			if err != nil || len(hist) != 3 {
				t.Fatalf("history of the Jupyter turns: %v %+v", err, hist)
			}
			if r, err := hist[2].RunResult(); err != nil || r.Stdout != "42\n" || len(r.Outputs) != 1 || r.Status != "ok" {
				t.Fatalf("the third turn's record lost its output: %v %+v", err, r)
			}
			// carryover's own API runs on the same session: the Jupyter client sees none of it.
			ts.run(kid, "y = x * 2")
			id := w.send("shell", "kernel_info_request", map[string]any{})
			ids[id] = true
			if reply, _ := w.until(id); reply.typ() != "kernel_info_reply" || reply.Content["protocol_version"] == nil {
				t.Fatalf("kernel_info: %v", reply.Content)
			}
			for _, m := range w.seen {
				if p := m.parent(); p != "" && !ids[p] {
					t.Fatalf("a message of carryover's own execution reached the Jupyter client: %s %v", m.typ(), m.Content)
				}
			}
			// The kernel dies mid-cell: error reply and idle for the cell, restarting announced,
			// then the session continues from its last checkpoint.
			reply, msgs := w.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
			if reply.Content["status"] != "error" || reply.Content["ename"] != "KernelDied" {
				t.Fatalf("a dead kernel's cell: %v", reply.Content)
			}
			isRestarting := func(m jmsg) bool { return m.typ() == "status" && m.Content["execution_state"] == "restarting" }
			restarting := false
			for _, m := range w.seen {
				restarting = restarting || isRestarting(m)
			}
			for !restarting {
				restarting = isRestarting(w.recv())
			}
			reply, msgs = w.execute("print(x, y)")
			if reply.Content["status"] != "ok" || stdoutOf(msgs) != "42 84\n" {
				t.Fatalf("after the kernel's death: %v %q", reply.Content, stdoutOf(msgs))
			}
		})
	}
}

// TestJupyterLostRequests: carryover is killed with SIGKILL while a cell runs and another waits; the
// client that reconnects to the restarted process gets an explicit error reply and an idle for
// both, and the session continues from its last checkpoint.
func TestJupyterLostRequests(t *testing.T) {
	t.Parallel()
	srv := startBinary(t)
	kid, w := openJupyterKernel(t, srv.Base)
	w.execute("x = 1")
	// Minimal contents (no silent, store_history...): ipykernel drops an execute_request without
	// "silent"; carryover fills Jupyter's defaults in.
	running := w.send("shell", "execute_request", map[string]any{"code": "import time\nx = 2\ntime.sleep(60)"})
	queued := w.send("shell", "execute_request", map[string]any{"code": "x = 3"})
	for m := w.recv(); m.typ() != "execute_input" || m.parent() != running; m = w.recv() {
	}
	// The running cell's execute_input does not say the queued request has left the socket: the
	// door reads frames one at a time, and a request still in the socket's buffer when carryover is
	// killed was never received (no Jupyter client can tell). What the door promises is for the
	// requests it has on record, so the kill waits for both to be there.
	awaitInflight(t, srv.Base, kid, 2)
	srv.Kill9()
	srv.Restart(t)
	w2 := dialJupyter(t, srv.Base, kid, false, testToken)
	for _, id := range []string{running, queued} {
		reply, _ := w2.until(id)
		if reply.Content["status"] != "error" || reply.Content["ename"] != "CarryoverRestarted" {
			t.Fatalf("lost request %s: %v", id, reply.Content)
		}
	}
	if _, msgs := w2.execute("print(x)"); stdoutOf(msgs) != "1\n" {
		t.Fatalf("after the restart x is %q, want the last checkpoint's 1", stdoutOf(msgs))
	}
}

// awaitInflight waits until the Jupyter door's record of a kernel's running and queued
// execute_requests (session data "jupyter_inflight") holds n of them.
func awaitInflight(t *testing.T, base, kid string, n int) {
	t.Helper()
	var doc struct {
		Session struct {
			Data map[string]any `json:"data"`
		} `json:"session"`
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st := jreq(t, base, "GET", "/api/sessions/"+kid, "", &doc); st != 200 {
			t.Fatalf("GET session %s: %d", kid, st)
		}
		if l, _ := doc.Session.Data["jupyter_inflight"].([]any); len(l) == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the door's in-flight record never held %d requests: %v", n, doc.Session.Data["jupyter_inflight"])
		}
	}
}

// TestJupyterCloseOnShutdown: a graceful stop closes the channels websockets with 1012 (service
// restart), on which JupyterLab reconnects (1000/1001 would make it give up).
func TestJupyterCloseOnShutdown(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	var kern map[string]any
	if st := jreq(t, ts.base, "POST", "/jupyter/api/kernels", `{"name":"python3"}`, &kern); st != 201 {
		t.Fatalf("POST kernels: %d", st)
	}
	w := dialJupyter(t, ts.base, kern["id"].(string), true, testToken)
	w.execute("1+1")
	stopped := make(chan struct{})
	go func() { ts.stop(); close(stopped) }()
	defer func() { <-stopped }() // before the cleanup's own stop: stop is not safe to run twice at once
	_ = w.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		if _, _, err := w.c.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, 1012) {
				t.Errorf("closed with %v, want code 1012", err)
			}
			return
		}
	}
}

// checkOwnClientSawTurns reads a carryover websocket client's frames until it saw each code run as a
// Jupyter turn (busy with the code, result, idle, under one "jupyter-" run id); the last printed out.
func checkOwnClientSawTurns(t *testing.T, own *client.Conn, codes []string, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seen []string
	printed, result := "", false
	for len(seen) < len(codes) {
		f, err := own.Next(ctx)
		if err != nil {
			t.Fatalf("carryover's websocket client saw %d of the Jupyter turns: %v", len(seen), err)
		}
		if !strings.HasPrefix(f.ID, "jupyter-") {
			continue
		}
		switch {
		case f.Type == "status" && f.ExecutionState == "busy":
			if f.Code != codes[len(seen)] {
				t.Fatalf("Jupyter turn %d shown with code %q, want %q", len(seen)+1, f.Code, codes[len(seen)])
			}
			printed, result = "", false
		case f.Type == "output" && f.Output != nil:
			printed += f.Output.Text
		case f.Type == "result":
			result = f.Result != nil && f.Result.Status == "ok"
		case f.Type == "status" && f.ExecutionState == "idle":
			if !result {
				t.Fatalf("Jupyter turn %d: idle without an ok result first", len(seen)+1)
			}
			seen = append(seen, f.ID)
		}
	}
	if printed != out {
		t.Fatalf("the last Jupyter turn's output frames printed %q, want %q", printed, out)
	}
}

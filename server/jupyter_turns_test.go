package server_test

// The Jupyter door's turns under what a notebook GUI does: the interrupt button followed at once by
// kernel_info_request and a cell, a cell sent the moment an error's idle arrives, and requests sent
// while carryover restores the session's kernel (after a kill -9 + restart, a hibernation).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

// checkpointFailedNotice is the stderr line the door prints in a cell whose checkpoint failed.
const checkpointFailedNotice = "this cell's checkpoint failed"

// lastCheckpointTurn is the turn of the session's last checkpoint (0 when none).
func lastCheckpointTurn(t *testing.T, base, id string) int {
	t.Helper()
	var got struct {
		Session struct {
			LastCheckpoint *struct {
				Turn int `json:"turn"`
			} `json:"last_checkpoint"`
		} `json:"session"`
	}
	getJSON(t, base+"/api/sessions/"+id, &got)
	if got.Session.LastCheckpoint == nil {
		return 0
	}
	return got.Session.LastCheckpoint.Turn
}

// collect reads until every id in ids has both its reply and its idle; it returns each id's
// messages and fails on a second reply to one of them.
func (w *jws) collect(ids ...string) map[string][]jmsg {
	w.t.Helper()
	out := map[string][]jmsg{}
	replied, idle := map[string]bool{}, map[string]bool{}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	done := func() bool {
		for _, id := range ids {
			if !replied[id] || !idle[id] {
				return false
			}
		}
		return true
	}
	for !done() {
		m := w.recv()
		p := m.parent()
		if !want[p] {
			continue
		}
		out[p] = append(out[p], m)
		if strings.HasSuffix(m.typ(), "_reply") {
			if replied[p] {
				w.t.Fatalf("a second %s for %s: %v", m.typ(), p, m.Content)
			}
			replied[p] = true
		}
		if m.typ() == "status" && m.Content["execution_state"] == "idle" {
			idle[p] = true
		}
	}
	return out
}

func replyOf(msgs []jmsg) jmsg {
	for _, m := range msgs {
		if strings.HasSuffix(m.typ(), "_reply") {
			return m
		}
	}
	return jmsg{}
}

func stderrOf(msgs []jmsg) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.typ() == "stream" && m.Content["name"] == "stderr" {
			b.WriteString(fmt.Sprint(m.Content["text"]))
		}
	}
	return b.String()
}

func checkpointFailed(msgs []jmsg) bool {
	for _, m := range msgs {
		if m.typ() == "stream" && strings.Contains(fmt.Sprint(m.Content["text"]), checkpointFailedNotice) {
			return true
		}
	}
	return false
}

// TestJupyterInterruptThenCell: a sleeping cell is interrupted (POST .../interrupt, as JupyterLab's
// button does), kernel_info_request is sent at once (as a notebook GUI does), and a new cell the
// moment the interrupted cell's idle arrives (a cell sent before it is behind an error: the kernel
// aborts it, stop_on_error). 50 times: the interrupted cell's checkpoint is committed (no
// "checkpoint failed", the checkpoint's turn is the cell's), the new cell runs (never aborted) and
// sees the interrupted cell's variable. Then carryover is killed -9 right after an interrupted
// cell's idle: its variable survives.
func TestJupyterInterruptThenCell(t *testing.T) {
	t.Parallel()
	srv := startBinary(t)
	kid, w := openJupyterKernel(t, srv.Base)
	w.execute("import time")
	interrupted := func(i int) []jmsg {
		sleeper := w.send("shell", "execute_request", map[string]any{"code": fmt.Sprintf("v = %d\nprint('asleep', flush=True)\ntime.sleep(30)", i)})
		var msgs []jmsg
		for {
			m := w.recv()
			if m.parent() == sleeper {
				msgs = append(msgs, m)
			}
			if m.parent() == sleeper && m.typ() == "stream" {
				break
			}
		}
		if st := jreq(t, srv.Base, "POST", "/jupyter/api/kernels/"+kid+"/interrupt", "", nil); st != 204 {
			t.Fatalf("interrupt: %d", st)
		}
		return append(msgs, w.collect(sleeper)[sleeper]...)
	}
	for i := range 50 {
		sleeper := w.send("shell", "execute_request", map[string]any{"code": fmt.Sprintf("v = %d\nprint('asleep', flush=True)\ntime.sleep(30)", i)})
		for m := w.recv(); m.parent() != sleeper || m.typ() != "stream"; m = w.recv() {
		}
		if st := jreq(t, srv.Base, "POST", "/jupyter/api/kernels/"+kid+"/interrupt", "", nil); st != 204 {
			t.Fatalf("interrupt: %d", st)
		}
		info := w.send("shell", "kernel_info_request", map[string]any{})
		got := w.collect(sleeper, info)
		r := replyOf(got[sleeper])
		if r.Content["ename"] != "KeyboardInterrupt" {
			t.Fatalf("repetition %d: the interrupted cell answered %v", i, r.Content["status"])
		}
		if checkpointFailed(got[sleeper]) {
			t.Fatalf("repetition %d: the interrupted cell's checkpoint failed: %q", i, stderrOf(got[sleeper]))
		}
		if turn := lastCheckpointTurn(t, srv.Base, kid); float64(turn) != r.Content["execution_count"] {
			t.Fatalf("repetition %d: the interrupted turn %v is not checkpointed (last checkpoint turn %d)", i, r.Content["execution_count"], turn)
		}
		// The moment the idle (and kernel_info's reply, in line behind it) arrived: a new cell.
		next := w.send("shell", "execute_request", map[string]any{"code": "w = v + 1\nprint(w)"})
		got[next] = w.collect(next)[next]
		if r := replyOf(got[info]); r.typ() != "kernel_info_reply" || r.Content["status"] != "ok" {
			t.Fatalf("repetition %d: kernel_info: %v", i, r.Content)
		}
		if r := replyOf(got[next]); r.Content["status"] != "ok" || stdoutOf(got[next]) != fmt.Sprintf("%d\n", i+1) {
			t.Fatalf("repetition %d: the cell after the interrupt: %v %q", i, r.Content, stdoutOf(got[next]))
		}
	}
	// Killed right after an interrupted cell's idle: its checkpoint holds v.
	msgs := interrupted(1000)
	if checkpointFailed(msgs) {
		t.Fatalf("the last interrupted cell's checkpoint failed: %q", stderrOf(msgs))
	}
	srv.Kill9()
	srv.Restart(t)
	w = dialJupyter(t, srv.Base, kid, true, testToken)
	if _, out := w.execute("print(v)"); stdoutOf(out) != "1000\n" {
		t.Fatalf("after kill -9, v is %q, want the interrupted cell's 1000", stdoutOf(out))
	}
}

// TestJupyterErrorThenCell: `1/0`, then a cell sent the moment its idle arrives, 100 times: the cell
// is never aborted (carryover must not abort what the kernel would have run), and every error turn
// is checkpointed before its idle. Two cells sent together after an error are still aborted, as
// ipykernel's stop_on_error does, and the client's own user_expressions come back as sent.
func TestJupyterErrorThenCell(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	var kern map[string]any
	if st := jreq(t, ts.base, "POST", "/jupyter/api/kernels", `{"name":"python3"}`, &kern); st != 201 {
		t.Fatalf("POST kernels: %d", st)
	}
	kid := kern["id"].(string)
	w := dialJupyter(t, ts.base, kid, false, testToken)
	for i := range 100 {
		reply, msgs := w.execute("1/0")
		if reply.Content["ename"] != "ZeroDivisionError" || checkpointFailed(msgs) {
			t.Fatalf("repetition %d: 1/0 answered %v (stderr %q)", i, reply.Content["ename"], stderrOf(msgs))
		}
		if turn := lastCheckpointTurn(t, ts.base, kid); float64(turn) != reply.Content["execution_count"] {
			t.Fatalf("repetition %d: the error turn %v is not checkpointed (last checkpoint turn %d)", i, reply.Content["execution_count"], turn)
		}
		if reply, _ = w.execute(fmt.Sprintf("z = %d", i)); reply.Content["status"] != "ok" {
			t.Fatalf("repetition %d: the cell after the error answered %v", i, reply.Content)
		}
	}
	// Sent together, the second is behind the error: aborted, as the kernel itself would.
	first := w.send("shell", "execute_request", map[string]any{"code": "1/0"})
	second := w.send("shell", "execute_request", map[string]any{"code": "z = -1"})
	got := w.collect(first, second)
	if r := replyOf(got[second]); r.Content["status"] != "aborted" {
		t.Fatalf("a cell queued behind an error: %v, want aborted", r.Content)
	}
	// The client's user_expressions are answered as sent, without carryover's snapshot expression.
	id := w.send("shell", "execute_request", map[string]any{"code": "q = 6", "user_expressions": map[string]any{"mine": "q * 7"}})
	r := replyOf(w.collect(id)[id])
	ue, _ := r.Content["user_expressions"].(map[string]any)
	mine, _ := ue["mine"].(map[string]any)
	data, _ := mine["data"].(map[string]any)
	if len(ue) != 1 || data["text/plain"] != "42" {
		t.Fatalf("user_expressions answered %v, want only mine = 42", r.Content["user_expressions"])
	}
	if r, _ := w.execute("print(z)"); r.Content["status"] != "ok" {
		t.Fatalf("print(z): %v", r.Content)
	}
}

// TestJupyterFloodDuringRestore: requests of every kind flood a channels websocket while carryover
// restores the session's kernel, after a kill -9 + restart and after a hibernation: each is answered
// exactly once, and each channel's replies come in the order its requests were sent.
func TestJupyterFloodDuringRestore(t *testing.T) {
	t.Parallel()
	srv := startBinary(t)
	kid, w := openJupyterKernel(t, srv.Base)
	w.execute("x = 0")
	c := client.New(srv.Base, testToken)
	for round, restore := range []func(){
		func() { srv.Kill9(); srv.Restart(t) },
		func() {
			if _, err := c.Hibernate(context.Background(), kid); err != nil {
				t.Fatalf("hibernate: %v", err)
			}
		},
	} {
		restore()
		w = dialJupyter(t, srv.Base, kid, round%2 == 0, testToken)
		var order = map[string][]string{} // channel -> request ids in the order sent
		var all []string
		for i := range 12 {
			send := func(channel, typ string, content map[string]any) {
				id := w.send(channel, typ, content)
				order[channel] = append(order[channel], id)
				all = append(all, id)
			}
			send("shell", "execute_request", map[string]any{"code": "x += 1\nprint(x)"})
			send("shell", "kernel_info_request", map[string]any{})
			send("control", "kernel_info_request", map[string]any{})
			send("shell", "complete_request", map[string]any{"code": "pri", "cursor_pos": 3})
			if i%4 == 0 {
				send("shell", "is_complete_request", map[string]any{"code": "for i in x:"})
			}
		}
		got := w.collect(all...)
		// A last request, behind all of them on shell: a late second reply to any would come before it.
		last := w.send("shell", "kernel_info_request", map[string]any{})
		w.collect(last)
		// Replies per channel in the order sent, each exactly once.
		replies := map[string][]string{}
		for _, m := range w.seen {
			if p := m.parent(); (got[p] != nil || p == last) && strings.HasSuffix(m.typ(), "_reply") {
				replies[m.Channel] = append(replies[m.Channel], p)
			}
		}
		for ch, ids := range order {
			if ch == "shell" {
				ids = append(ids[:len(ids):len(ids)], last)
			}
			if strings.Join(replies[ch], " ") != strings.Join(ids, " ") {
				t.Fatalf("round %d: %s replies in the order %v, sent %v", round, ch, replies[ch], ids)
			}
		}
		n := 0
		for _, id := range order["shell"] {
			r := replyOf(got[id])
			if st := r.Content["status"]; st == "error" || st == "aborted" || (st != "ok" && r.typ() != "is_complete_reply") {
				t.Fatalf("round %d: %s answered %v", round, r.typ(), r.Content)
			}
			if r.typ() == "execute_reply" {
				n++
				if want := fmt.Sprintf("%d\n", round*12+n); stdoutOf(got[id]) != want {
					t.Fatalf("round %d: execute %d printed %q, want %q (state from before the restore)", round, n, stdoutOf(got[id]), want)
				}
			}
		}
	}
}

// TestJupyterInterruptAsTheCellFinishes: an interrupt that reaches ipykernel after the cell ran,
// before its reply went out (ipykernel's pre-reply sleep, stretched here to hold the moment open),
// makes ipykernel drop the reply. The door answers the cell as interrupted and the next cell runs:
// it used to wait for the reply for ever, the notebook's cell busy until the kernel was restarted.
func TestJupyterInterruptAsTheCellFinishes(t *testing.T) {
	t.Parallel()
	srv := startBinary(t)
	kid, w := openJupyterKernel(t, srv.Base)
	w.execute("x = 1\nget_ipython().kernel._execute_sleep = 3")
	cell := w.send("shell", "execute_request", map[string]any{"code": "x = 2\nprint('ran', flush=True)"})
	for m := w.recv(); m.parent() != cell || m.typ() != "stream"; m = w.recv() {
	}
	time.Sleep(500 * time.Millisecond) // the cell ran; ipykernel sleeps before its reply
	if st := jreq(t, srv.Base, "POST", "/jupyter/api/kernels/"+kid+"/interrupt", "", nil); st != 204 {
		t.Fatalf("interrupt: %d", st)
	}
	start := time.Now()
	reply, _ := w.until(cell)
	if reply.Content["ename"] != "KeyboardInterrupt" {
		t.Fatalf("the cell interrupted as it finished answered %v", reply.Content)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("answered %s after the interrupt", d)
	}
	w.execute("get_ipython().kernel._execute_sleep = 0.0005")
	if _, msgs := w.execute("print(x)"); stdoutOf(msgs) != "2\n" {
		t.Fatalf("after the interrupted cell x is %q, want 2 (the cell ran)", stdoutOf(msgs))
	}
}

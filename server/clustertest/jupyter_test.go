package clustertest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// jupyterExecute sends one execute_request over a Jupyter channels websocket (legacy JSON framing)
// and returns the cell's stdout once its execute_reply has come.
func jupyterExecute(t *testing.T, ws *websocket.Conn, code string) string {
	t.Helper()
	msgID := fmt.Sprintf("clustertest-%d", time.Now().UnixNano())
	req := map[string]any{
		"header": map[string]any{"msg_id": msgID, "msg_type": "execute_request", "session": "clustertest",
			"username": "t", "date": time.Now().UTC().Format(time.RFC3339Nano), "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "channel": "shell",
		"content": map[string]any{"code": code, "silent": false, "store_history": true,
			"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true},
	}
	if err := ws.WriteJSON(req); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	var out strings.Builder
	for {
		var m struct {
			Channel string `json:"channel"`
			Header  struct {
				MsgType string `json:"msg_type"`
			}
			ParentHeader struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content json.RawMessage
		}
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("reading the channels websocket: %v (stdout so far %q)", err, out.String())
		}
		if m.ParentHeader.MsgID != msgID {
			continue
		}
		switch m.Header.MsgType {
		case "stream":
			var c struct{ Text string }
			json.Unmarshal(m.Content, &c)
			out.WriteString(c.Text)
		case "execute_reply":
			var c struct{ Status string }
			json.Unmarshal(m.Content, &c)
			if c.Status != "ok" {
				t.Fatalf("execute_reply %s: %s", c.Status, m.Content)
			}
			return out.String()
		}
	}
}

// TestJupyterReachesOwner: a Jupyter client pointed at node B (REST and the channels websocket,
// the token in the path as jupyter_server's gateway client sends it) talks to the kernel of the
// session A owns: the variable A's REST set is there, the pid is A's kernel's, and what it changes
// is seen through A. B never starts a kernel of its own for the session.
func TestJupyterReachesOwner(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	s, err := a.c.CreateSession(t.Context(), client.CreateRequest{}) // a UUID: Jupyter's kernel id
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID
	run(t, a, id, "x = 41")
	pidA := kernelPID(t, a, id)

	wsURL := "ws" + strings.TrimPrefix(b.base, "http") + "/jupyter/token/" + testToken + "/api/kernels/" + id + "/channels"
	ws, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL, nil)
	if err != nil {
		t.Fatalf("channels websocket through b: %v (%v)", err, resp)
	}
	defer ws.Close()
	got := jupyterExecute(t, ws, "x += 1\nimport os as _o\nprint(x, _o.getpid())\ndel _o")
	if strings.TrimSpace(got) != "42 "+strconv.Itoa(pidA) {
		t.Fatalf("a cell through b did not run in a's kernel (pid %d, x 41 -> 42): %q", pidA, got)
	}
	if r := run(t, a, id, "print(x)"); strings.TrimSpace(r.Stdout) != "42" {
		t.Fatalf("a does not see the cell run through b: %q", r.Stdout)
	}
	if s := hopStatus(t, b, id); s != 421 {
		t.Fatalf("b answers a hop for a's session with %d, want 421 (it must not serve it itself)", s)
	}
}

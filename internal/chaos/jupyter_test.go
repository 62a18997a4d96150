package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

// jupyterRunner drives a session through the Jupyter door as a Jupyter client does: an
// execute_request over the kernel's channels websocket (the token in the path, as jupyter_server's
// gateway client sends it). A connection that fails before the reply is dialled again and the
// same request (its msg_id) sent again, until the turn's deadline: the door must never run it
// twice, and answers one it already answered from its record (a reply without the cell's output).
type jupyterRunner struct{ wsBase, token string }

func (j jupyterRunner) name() string { return "jupyter" }

func (j jupyterRunner) run(ctx context.Context, sid, code string) (*client.RunResult, error) {
	msgID := "chaos-" + servertest.RandHex(8)
	wait := 100 * time.Millisecond
	for {
		res, err := j.once(ctx, sid, code, msgID)
		if res != nil || ctx.Err() != nil { // answered (an error reply too), or out of time
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// once sends the request on a new connection and reads until its execute_reply; a nil result is a
// connection that failed before the reply (sent again), an error beside a result is the reply's.
func (j jupyterRunner) once(ctx context.Context, sid, code, msgID string) (*client.RunResult, error) {
	url := j.wsBase + "/jupyter/token/" + j.token + "/api/kernels/" + sid + "/channels"
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	req := map[string]any{
		"header": map[string]any{"msg_id": msgID, "msg_type": "execute_request", "session": "chaos",
			"username": "chaos", "date": time.Now().UTC().Format(time.RFC3339Nano), "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "channel": "shell",
		"content": map[string]any{"code": code, "silent": false, "store_history": true,
			"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true},
	}
	if err := ws.WriteJSON(req); err != nil {
		return nil, err
	}
	var out, notices strings.Builder
	for {
		var m struct {
			Header struct {
				MsgType string `json:"msg_type"`
			}
			ParentHeader struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content json.RawMessage
		}
		if err := ws.ReadJSON(&m); err != nil {
			return nil, err
		}
		if m.ParentHeader.MsgID != msgID {
			continue
		}
		switch m.Header.MsgType {
		case "stream":
			var c struct{ Name, Text string }
			json.Unmarshal(m.Content, &c)
			if c.Name == "stderr" {
				notices.WriteString(c.Text)
			} else {
				out.WriteString(c.Text)
			}
		case "execute_reply":
			var c struct{ Status, EName, EValue string }
			json.Unmarshal(m.Content, &c)
			notices.WriteString(c.EValue)
			res := &client.RunResult{Status: c.Status, Stdout: out.String(), Restore: filesAheadIn(notices.String())}
			if _, ckpt, ok := strings.Cut(notices.String(), "checkpoint failed, a crash now would lose it: "); ok {
				res.CheckpointError = ckpt // the door's notice: the model counts the turn as not yet safe
			}
			if c.Status != "ok" {
				return res, fmt.Errorf("jupyter: execute_reply %s: %s: %s", c.Status, c.EName, c.EValue)
			}
			return res, nil
		}
	}
}

// filesAheadIn reads the files the door named as ahead of the checkpoint in its notice (a stderr
// stream, or a dead cell's error): "... kept as they are: a.txt, b.txt; ..." or "...]".
func filesAheadIn(text string) *client.RestoreReport {
	_, rest, ok := strings.Cut(text, "differ from the checkpoint, kept as they are: ")
	if !ok {
		return nil
	}
	if i := strings.IndexAny(rest, ";]\n"); i >= 0 {
		rest = rest[:i]
	}
	return &client.RestoreReport{FilesAhead: strings.Split(rest, ", ")}
}

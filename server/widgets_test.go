package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/client"
)

// widgetSyncs reads c's frames until it has the sync comm_open (server/session/widget_sync.go) of
// every model of ids, in whatever order they come, and answers their contents and metadata by id.
func widgetSyncs(t *testing.T, c *websocket.Conn, ids ...string) (state, meta map[string]map[string]any) {
	t.Helper()
	state, meta = map[string]map[string]any{}, map[string]map[string]any{}
	_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
	for len(state) < len(ids) {
		var f struct {
			Type     string          `json:"type"`
			MsgType  string          `json:"msg_type"`
			Content  json.RawMessage `json:"content"`
			Metadata map[string]any  `json:"metadata"`
		}
		if err := c.ReadJSON(&f); err != nil {
			t.Fatalf("reading frames for widgets %v (got %v): %v", ids, state, err)
		}
		var content struct {
			CommID string         `json:"comm_id"`
			Data   map[string]any `json:"data"`
		}
		_ = json.Unmarshal(f.Content, &content)
		if f.Type == "comm" && f.MsgType == "comm_open" && f.Metadata["carryover_sync"] == true && slices.Contains(ids, content.CommID) {
			state[content.CommID], meta[content.CommID] = content.Data, f.Metadata
		}
	}
	return state, meta
}

// The page's side of widgets that come back, over the websocket: a page that connects gets the
// kernel's live widgets as comm_open frames (the slider at 13, the Output with "n = 13"); the page
// moves the slider to 15, which is checkpointed without a cell; after a restart and a rotation (new
// kernels, the checkpoint restored) the page gets the widgets again from the new kernel, at 15; a
// fork's kernel has them too, at the same model ids.
func TestWidgetsComeBackOverTheWebsocket(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "wg"})
	ts.run("wg", "from ipywidgets import interact\n@interact(n=(0, 20))\ndef square(n=5):\n    print('n =', n)")
	ids := ts.run("wg", "square.widget.children[0].value = 13\nprint(square.widget.children[0].model_id, square.widget.out.model_id)")
	f := strings.Fields(ids.Stdout) // "n = 13" first: with no page connected, interact prints in the cell
	if len(f) < 2 {
		t.Fatalf("model ids: %q", ids.Stdout)
	}
	slider, out := f[len(f)-2], f[len(f)-1]
	dial := func(id string) *websocket.Conn {
		u := strings.Replace(ts.base, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws?comms=true&token=" + testToken
		c, _, err := websocket.DefaultDialer.Dial(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	want := 13
	check := func(c *websocket.Conn, what string) {
		t.Helper()
		state, meta := widgetSyncs(t, c, slider, out)
		if state[slider]["value"] != float64(want) {
			t.Fatalf("%s: the slider's state %v, want value %d", what, state[slider], want)
		}
		if b, _ := json.Marshal(meta[out]["outputs"]); !strings.Contains(string(b), fmt.Sprintf("n = %d", want)) {
			t.Fatalf("%s: the Output widget's outputs %s, want n = %d", what, b, want)
		}
	}
	page := dial("wg")
	check(page, "a page that connects")
	// The page moves the slider to 15: no cell runs, yet a checkpoint follows (widget_checkpoint.go).
	before := ts.checkpoints("wg")[0].ID
	move := map[string]any{"type": "comm", "msg_type": "comm_msg", "msg_id": "move15", "content": map[string]any{"comm_id": slider,
		"data": map[string]any{"method": "backbone", "sync_data": map[string]any{"value": 15}}}}
	if err := page.WriteJSON(move); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ts.checkpoints("wg")[0].ID == before; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint after the page moved the slider")
		}
	}
	want = 15
	for _, step := range []struct {
		what string
		do   func(context.Context) (*client.Session, error)
	}{
		{"after a restart", func(ctx context.Context) (*client.Session, error) { return ts.c.Restart(ctx, "wg") }},
		{"after a rotation", func(ctx context.Context) (*client.Session, error) { return ts.c.Rotate(ctx, "wg") }},
	} {
		c := dial("wg")
		if _, err := step.do(ts.ctx()); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		check(c, step.what)
	}
	ts.fork("wg", client.ForkRequest{SessionID: "wg-fork"})
	c := dial("wg-fork")
	if got := ts.run("wg-fork", "print(square.widget.children[0].value, square.widget.children[0].model_id)").Stdout; got != "15 "+slider+"\n" {
		t.Fatalf("the fork's kernel has %q", got)
	}
	check(c, "a fork")
}

package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/configs"
)

func (ts *testServer) ws(t *testing.T, id string) *websocket.Conn {
	t.Helper()
	u := strings.Replace(ts.base, "http://", "ws://", 1) + "/api/sessions/" + id + "/ws?token=" + testToken
	c, res, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("ws dial: %v (status %d)", err, status)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type frame map[string]any

func readFrame(t *testing.T, c *websocket.Conn, d time.Duration) frame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	var f frame
	if err := c.ReadJSON(&f); err != nil {
		t.Fatalf("ws read: %v", err)
	}
	return f
}

// readUntil reads frames until one of type typ with id arrives, returning all frames read.
func readUntil(t *testing.T, c *websocket.Conn, typ, id string) []frame {
	t.Helper()
	var out []frame
	for {
		f := readFrame(t, c, 60*time.Second)
		out = append(out, f)
		if f["type"] == typ && (id == "" || f["id"] == id) {
			return out
		}
		if f["type"] == "error" && f["id"] == id {
			t.Fatalf("error frame: %v", f)
		}
	}
}

// TestWebsocketStreamsInKernelOrder checks busy -> outputs in order -> result -> idle, and that
// the streamed outputs arrive before the run ends (not all at once).
func TestWebsocketStreamsInKernelOrder(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "ws1"})
	c := ts.ws(t, "ws1")
	code := "import time, sys\nfor i in range(5):\n    print(i, flush=True)\n    print('e', i, file=sys.stderr, flush=True)\n    time.sleep(0.05)\n42"
	if err := c.WriteJSON(map[string]any{"type": "run", "id": "c1", "code": code}); err != nil {
		t.Fatal(err)
	}
	frames := readUntil(t, c, "result", "c1")
	var text strings.Builder
	sawBusy := false
	for _, f := range frames {
		switch f["type"] {
		case "status":
			if f["execution_state"] == "busy" {
				sawBusy = true
			}
		case "output":
			if !sawBusy {
				t.Fatalf("output before busy: %v", frames)
			}
			o := f["output"].(map[string]any)
			if o["type"] == "stream" && o["name"] == "stdout" {
				text.WriteString(o["text"].(string))
			}
		}
	}
	if text.String() != "0\n1\n2\n3\n4\n" {
		t.Fatalf("stdout order %q", text.String())
	}
	res := frames[len(frames)-1]["result"].(map[string]any)
	if res["result"] != "42" || res["stdout"] != "0\n1\n2\n3\n4\n" || !strings.Contains(res["stderr"].(string), "e 4") {
		t.Fatalf("result %v", res)
	}
	// idle follows the result and closes the turn.
	if f := readFrame(t, c, 10*time.Second); f["type"] != "status" || f["execution_state"] != "idle" || f["id"] != "c1" {
		t.Fatalf("after result: %v", f)
	}
}

// TestWebsocketInput answers an input() prompt.
func TestWebsocketInput(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "ws2"})
	c := ts.ws(t, "ws2")
	_ = c.WriteJSON(map[string]any{"type": "run", "id": "q", "code": "name = input('Name: ')\nprint('hi', name)"})
	frames := readUntil(t, c, "input_request", "q")
	if p := frames[len(frames)-1]["prompt"]; p != "Name: " {
		t.Fatalf("prompt %v", p)
	}
	_ = c.WriteJSON(map[string]any{"type": "input_reply", "id": "q", "value": "Ada"})
	frames = readUntil(t, c, "result", "q")
	if out := frames[len(frames)-1]["result"].(map[string]any)["stdout"]; !strings.Contains(out.(string), "hi Ada") {
		t.Fatalf("stdout %v", out)
	}
	// The answer was saved like any variable.
	if r := ts.run("ws2", "print(name)"); r.str("stdout") != "Ada\n" {
		t.Fatalf("%s", r.Body)
	}
}

// TestWebsocketReconnectMidRun: a client that connects while a run is going gets its outputs so
// far and the rest live, without duplicates.
func TestWebsocketReconnectMidRun(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "ws3"})
	ts.run("ws3", "1") // kernel up
	done := make(chan resp, 1)
	go func() {
		done <- ts.do("POST", "/api/sessions/ws3/run", map[string]any{"code": "import time\nfor i in range(10):\n    print(i, flush=True)\n    time.sleep(0.1)"})
	}()
	time.Sleep(400 * time.Millisecond)
	c := ts.ws(t, "ws3")
	first := readFrame(t, c, 10*time.Second)
	if first["type"] != "running" {
		t.Fatalf("first frame %v", first)
	}
	id := first["id"].(string)
	var got strings.Builder
	for _, o := range first["outputs"].([]any) {
		got.WriteString(o.(map[string]any)["text"].(string))
	}
	if got.Len() == 0 {
		t.Fatalf("no outputs so far in running frame: %v", first)
	}
	for _, f := range readUntil(t, c, "result", id) {
		if f["type"] == "output" {
			got.WriteString(f["output"].(map[string]any)["text"].(string))
		}
	}
	if got.String() != "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n" {
		t.Fatalf("outputs %q", got.String())
	}
	if r := <-done; r.Status != 200 {
		t.Fatalf("%s", r.Body)
	}
}

// TestSlowClientDoesNotBlock: a websocket client that never reads does not slow runs or lose the record.
func TestSlowClientDoesNotBlock(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "slow"})
	_ = ts.ws(t, "slow") // connected, never read
	start := time.Now()
	r := ts.run("slow", "for i in range(20000):\n    print('x' * 200, flush=(i % 50 == 0))\nprint('end')")
	if !strings.HasSuffix(r.str("stdout"), "end\n") || len(r.str("stdout")) < 20000*201 {
		t.Fatalf("record incomplete: %d bytes", len(r.str("stdout")))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("run took %s with a stalled client", d)
	}
	// The stored record is complete too.
	ex := ts.must(200, "GET", "/api/sessions/slow/executions", nil)
	last := ex.get("executions", "0", "result").(map[string]any)
	if !strings.HasSuffix(last["stdout"].(string), "end\n") {
		t.Fatalf("stored record incomplete")
	}
}

// TestRunsQueueInOrder: concurrent runs on one session execute one at a time, in arrival order.
func TestRunsQueueInOrder(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "order"})
	ts.run("order", "seen = []")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ts.run("order", fmt.Sprintf("import time\nseen.append(%d)\ntime.sleep(0.02)", i))
		}(i)
		time.Sleep(30 * time.Millisecond) // arrival order
	}
	wg.Wait()
	r := ts.run("order", "import json\nprint(json.dumps(seen))")
	var seen []int
	_ = json.Unmarshal([]byte(r.str("stdout")), &seen)
	if len(seen) != 8 {
		t.Fatalf("seen %v", seen)
	}
	for i, v := range seen {
		if v != i {
			t.Fatalf("out of order: %v", seen)
		}
	}
}

// TestWebsocketAuthAndOrigin: no token -> 401; a foreign Origin is refused.
func TestWebsocketAuthAndOrigin(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "wsa"})
	u := strings.Replace(ts.base, "http://", "ws://", 1) + "/api/sessions/wsa/ws"
	if _, res, err := websocket.DefaultDialer.Dial(u, nil); err == nil || res == nil || res.StatusCode != 401 {
		t.Fatalf("no token: %v", err)
	}
	h := http.Header{"Origin": []string{"http://evil.example"}}
	if _, res, err := websocket.DefaultDialer.Dial(u+"?token="+testToken, h); err == nil || res == nil || res.StatusCode != 401 {
		t.Fatalf("foreign origin accepted: %v", err)
	}
}

// TestInputSurvivesReload: the client that started a run goes away during input(); a new client
// sees the pending prompt in the running frame and answers it.
func TestInputSurvivesReload(t *testing.T) {
	ts := startServer(t, "")
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "ws4"})
	c1 := ts.ws(t, "ws4")
	_ = c1.WriteJSON(map[string]any{"type": "run", "id": "r1", "code": "v = input('Value? ')\nprint('got', v)"})
	readUntil(t, c1, "input_request", "r1")
	c1.Close()
	c2 := ts.ws(t, "ws4")
	first := readFrame(t, c2, 10*time.Second)
	if first["type"] != "running" || first["input_request"] == nil {
		t.Fatalf("running frame without the pending prompt: %v", first)
	}
	_ = c2.WriteJSON(map[string]any{"type": "input_reply", "id": "r1", "value": "42"})
	frames := readUntil(t, c2, "result", "r1")
	if out := frames[len(frames)-1]["result"].(map[string]any)["stdout"]; out != "Value? got 42\n" && out != "got 42\n" {
		t.Fatalf("stdout %q", out)
	}
}

// TestHugePrintIsCutInTheKernel: a single enormous print reaches the server as bounded messages and
// is cut at run.max_output_bytes inside the kernel, with a notice; the session keeps working.
func TestHugePrintIsCutInTheKernel(t *testing.T) {
	ts := startServer(t, "", func(c *configs.Config) { c.Run.MaxOutputBytes = 4 << 20 })
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "flood"})
	c := ts.ws(t, "flood")
	start := time.Now()
	_ = c.WriteJSON(map[string]any{"type": "run", "id": "big", "code": "keep = 7\nprint('x' * (300 * 2**20))"})
	frames := readUntil(t, c, "result", "big")
	elapsed := time.Since(start)
	biggest, total := 0, 0
	for _, f := range frames {
		if f["type"] == "output" {
			n := len(f["output"].(map[string]any)["text"].(string))
			total += n
			biggest = max(biggest, n)
		}
	}
	if biggest > 1<<20+256 || total > 4<<20+4096 {
		t.Fatalf("largest output message %d bytes, total %d: not cut in the kernel", biggest, total)
	}
	res := frames[len(frames)-1]["result"].(map[string]any)
	if !strings.Contains(res["stdout"].(string), "was dropped in the kernel") {
		t.Fatalf("no notice in stdout (%d bytes)", len(res["stdout"].(string)))
	}
	t.Logf("300 MB print answered in %s", elapsed)
	if r := ts.run("flood", "print('after'); keep"); r.str("result") != "7" || r.str("stdout") != "after\n" {
		t.Fatalf("next run: %s", r.Body)
	}
}

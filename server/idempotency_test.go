package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/faultproxy"
	"github.com/carryover/carryover/internal/servertest"
)

// countingTransport counts the requests sent to paths ending in suffix.
type countingTransport struct {
	suffix string
	n      *atomic.Int32
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, c.suffix) {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// appendCell appends to the session's list L, marks its start in the workspace, and lingers, so the
// test can cut the connection while it runs.
const appendCell = "import pathlib, time\nL.append(len(L))\npathlib.Path('started').write_text('x')\ntime.sleep(1)\nprint('ran', L)"

// TestIdempotentRunSurvivesACutConnection: the client's connection is reset (faultproxy) after
// the run reached the server and its cell started; the client retries with the same key and gets
// the first attempt's answer, and the cell ran once (the list it appends to holds one element).
func TestIdempotentRunSurvivesACutConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := startServer(t, "")
	id := servertest.ID(t)
	if _, err := ts.c.CreateSession(ctx, client.CreateRequest{SessionID: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.Run(ctx, id, client.RunRequest{Code: "L = []"}); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	var sends atomic.Int32
	pc := client.New("http://"+proxy.Addr(), testToken, client.WithHTTPClient(&http.Client{Transport: countingTransport{"/run", &sends}}))
	type answer struct {
		res *client.RunResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := pc.Run(ctx, id, client.RunRequest{Code: appendCell})
		done <- answer{res, err}
	}()
	for { // the cell runs: cut the connection under it
		if _, err := ts.c.GetFile(ctx, id, "started"); err == nil {
			break
		}
		select {
		case a := <-done:
			t.Fatalf("the run ended before its connection was cut: %+v %v", a.res, a.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	proxy.ResetAll()
	a := <-done
	if a.err != nil {
		t.Fatalf("run through a cut connection: %v", a.err)
	}
	if a.res.Stdout != "ran [0]\n" {
		t.Fatalf("answer %q, want the first attempt's", a.res.Stdout)
	}
	if n := sends.Load(); n < 2 {
		t.Fatalf("%d sends of the run: the connection was not cut under it", n)
	}
	res, err := ts.c.Run(ctx, id, client.RunRequest{Code: "print(L)"})
	if err != nil || res.Stdout != "[0]\n" {
		t.Fatalf("the list after the run: %+v %v: the cell ran more than once", res, err)
	}

	// The same key again (from another process, say): the stored answer, marked replayed; with
	// another body: refused.
	key := client.NewIdempotencyKey()
	first, err := ts.c.Run(ctx, id, client.RunRequest{Code: "L.append(len(L)); print(L)", IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	var replayed string
	hc := &http.Client{Transport: replayedTransport{&replayed}}
	again, err := client.New(ts.base, testToken, client.WithHTTPClient(hc)).Run(ctx, id, client.RunRequest{Code: "L.append(len(L)); print(L)", IdempotencyKey: key})
	if err != nil || again.Stdout != first.Stdout || again.ExecutionCount != first.ExecutionCount || replayed != "true" {
		t.Fatalf("retry: %+v %v (Idempotent-Replayed %q), want %+v replayed", again, err, replayed, first)
	}
	_, err = ts.c.Run(ctx, id, client.RunRequest{Code: "print('other')", IdempotencyKey: key})
	if client.ErrorCode(err) != client.CodeIdempotencyKeyReused {
		t.Fatalf("the key with another body: %v, want idempotency_key_reused", err)
	}
	if res, err := ts.c.Run(ctx, id, client.RunRequest{Code: "print(L)"}); err != nil || res.Stdout != "[0, 1]\n" {
		t.Fatalf("the list: %+v %v", res, err)
	}
}

// replayedTransport keeps the Idempotent-Replayed header of the last answer.
type replayedTransport struct{ v *string }

func (h replayedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		*h.v = resp.Header.Get("Idempotent-Replayed")
	}
	return resp, err
}

// TestWebsocketRunSurvivesACutConnection: the Go client's websocket is cut (faultproxy) while a
// run frame's cell runs; the client dials again, sends the frame again with its key, and gets the
// run's result (the cell ran once); its event subscription resumes after the last event it had,
// so the events it hands out are 1, 2, 3... without gap or repeat.
func TestWebsocketRunSurvivesACutConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts := startServer(t, "")
	id := servertest.ID(t)
	if _, err := ts.c.CreateSession(ctx, client.CreateRequest{SessionID: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.c.Run(ctx, id, client.RunRequest{Code: "L = []"}); err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	conn, err := client.New("http://"+proxy.Addr(), testToken).Connect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Send(ctx, client.SubscribeEvents{}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res    *client.RunResult
		frames []client.Frame
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		res, frames, err := conn.RunFrame(ctx, client.RunFrame{Code: appendCell})
		done <- answer{res, frames, err}
	}()
	for {
		if _, err := ts.c.GetFile(ctx, id, "started"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	proxy.ResetAll()
	a := <-done
	if a.err != nil || a.res == nil || a.res.Stdout != "ran [0]\n" {
		t.Fatalf("run through a cut websocket: %+v %v", a.res, a.err)
	}
	if res, err := ts.c.Run(ctx, id, client.RunRequest{Code: "print(L)"}); err != nil || res.Stdout != "[0]\n" {
		t.Fatalf("the list: %+v %v: the cell ran more than once", res, err)
	}
	// The events RunFrame passed over, then the live ones: numbered without gap or repeat.
	var seqs []int64
	for len(seqs) == 0 || seqs[len(seqs)-1] < lastEvent(t, ts, id) {
		nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		f, err := conn.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("next after %v: %v", seqs, err)
		}
		if f.Type == client.FrameEvent {
			seqs = append(seqs, f.Event.SequenceNumber)
		}
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("events %v: gap or repeat across the reconnect", seqs)
		}
	}
}

// lastEvent is the session's newest event number.
func lastEvent(t *testing.T, ts *testServer, id string) int64 {
	evs, err := ts.c.Events(context.Background(), id, 0, 0, "")
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %v %v", evs, err)
	}
	return evs[len(evs)-1].SequenceNumber
}

// TestMCPRunPythonIdempotencyKey: run_python called twice with one idempotency_key (an agent's MCP
// client retrying a call it lost the answer of) answers the first call's result and runs once; a
// key without session_id is refused.
func TestMCPRunPythonIdempotencyKey(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	cs := mcpConnect(t, ts, "Bearer "+testToken, "")
	id := okTool(t, cs, "run_python", map[string]any{"code": "L = []"}).out["session_id"].(string)
	args := map[string]any{"code": "L.append(len(L)); print('ran', L)", "session_id": id, "idempotency_key": "mcp-k1"}
	first := okTool(t, cs, "run_python", args)
	again := okTool(t, cs, "run_python", args)
	if first.out["stdout"] != "ran [0]\n" || again.out["stdout"] != first.out["stdout"] ||
		again.out["execution_count"] != first.out["execution_count"] {
		t.Fatalf("first %v, retry %v: want the first answer twice", first.out, again.out)
	}
	if got := okTool(t, cs, "run_python", map[string]any{"code": "print(L)", "session_id": id}).out["stdout"]; got != "[0]\n" {
		t.Fatalf("the list is %q: the cell ran twice", got)
	}
	if a := callTool(t, cs, "run_python", map[string]any{"code": "1", "idempotency_key": "k"}); !a.isError || !strings.Contains(a.text, "needs session_id") {
		t.Fatalf("a key without session_id: %+v", a)
	}
}

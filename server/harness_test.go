package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

const testToken = "test-token"

// testServer is a real carryover server on a loopback port with its own SQLite file, and a typed
// client of it.
type testServer struct {
	t   *testing.T
	dir string
	srv *servertest.Server
	// base is the server's http://host:port.
	base string
	// c is the typed client, with testToken. Its answers' HTTP statuses can be checked (withStatus).
	c *client.Client
}

// testConfig is the config of startServer before its tweaks (servertest.Config with testToken).
func testConfig(dir string) *configs.Config { return servertest.Config(dir, testToken) }

// startServer starts a server on dir (a new temp dir when ""), its kernel templates shared with the
// package's other servers (servertest.Start).
func startServer(t *testing.T, dir string, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	return startWith(t, dir, servertest.Start, tweak...)
}

// startServerOwnTemplate is startServer with kernel templates of the server's own, in its data dir:
// for a test that kills its template or looks for it there.
func startServerOwnTemplate(t *testing.T, dir string, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	return startWith(t, dir, servertest.StartOwnTemplate, tweak...)
}

func startWith(t *testing.T, dir string, start func(testing.TB, *configs.Config) *servertest.Server, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := testConfig(dir)
	for _, f := range tweak {
		f(cfg)
	}
	srv := start(t, cfg)
	return &testServer{t: t, dir: dir, srv: srv, base: srv.Base, c: newClient(srv.Base, testToken)}
}

// stop shuts the server down gracefully (idempotent).
func (ts *testServer) stop() {
	if err := ts.srv.Stop(); err != nil {
		ts.t.Errorf("shutdown: %v", err)
	}
}

// restart stops the server and starts a new one on the same data dir.
func (ts *testServer) restart() *testServer {
	ts.stop()
	return startServer(ts.t, ts.dir)
}

// startBinary serves the real binary (servertest.Binary) with testToken, a warm pool of one kernel
// and no sandbox, for tests of a process: kill -9, restarts, clients in other languages.
func startBinary(t *testing.T) *servertest.Process {
	t.Helper()
	return servertest.StartProcess(t, servertest.Options{Token: testToken,
		Flags: []string{"--pool.size", "1"}, Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
}

// ---- typed calls ----

// newClient is a typed client of base with token ("" for none) whose answers' HTTP statuses can be
// checked: a call made with a context from withStatus stores its answer's status there.
func newClient(base, token string) *client.Client {
	return client.New(base, token, client.WithHTTPClient(&http.Client{Transport: statusTransport{http.DefaultTransport}}))
}

type statusKey struct{}

// withStatus returns a context under which a call of a newClient client stores the HTTP status of
// its answer in *status (the typed client tells 2xx answers apart only by their bodies).
func withStatus(ctx context.Context) (context.Context, *int) {
	st := new(int)
	return context.WithValue(ctx, statusKey{}, st), st
}

// statusTransport records each answer's status in the request context's slot, if any.
type statusTransport struct{ rt http.RoundTripper }

func (s statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := s.rt.RoundTrip(req)
	if st, ok := req.Context().Value(statusKey{}).(*int); ok && res != nil {
		*st = res.StatusCode
	}
	return res, err
}

// must makes one typed call and fails t unless it succeeded with that HTTP status.
func must[T any](t *testing.T, status int, what string, call func(ctx context.Context) (T, error)) T {
	t.Helper()
	ctx, got := withStatus(t.Context())
	v, err := call(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if *got != status {
		t.Fatalf("%s: status %d, want %d", what, *got, status)
	}
	return v
}

// mustDo is must for calls that answer nothing.
func mustDo(t *testing.T, status int, what string, call func(ctx context.Context) error) {
	t.Helper()
	must(t, status, what, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
}

// errOf drops a call's value, keeping its error: errCode(t, errOf(ts.c.Run(...)), ...).
func errOf[T any](_ T, err error) error { return err }

// errCode asserts the API error shape: an *client.Error with that status and code, and a message.
func errCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("want %d %s with a message, got %v", status, code, err)
	}
	if e.Status != status || e.Code != code || e.Message == "" {
		t.Fatalf("want %d %s with a message, got %d %q: %q (details %v)", status, code, e.Status, e.Code, e.Message, e.Details)
	}
}

// ctx is the context of the current test's calls.
func (ts *testServer) ctx() context.Context { return ts.t.Context() }

// newSession creates a session (201).
func (ts *testServer) newSession(req client.CreateRequest) *client.Session {
	ts.t.Helper()
	return must(ts.t, 201, "create "+req.SessionID, func(ctx context.Context) (*client.Session, error) {
		return ts.c.CreateSession(ctx, req)
	})
}

// session gets a session (200).
func (ts *testServer) session(id string) *client.Session {
	ts.t.Helper()
	return must(ts.t, 200, "get "+id, func(ctx context.Context) (*client.Session, error) { return ts.c.GetSession(ctx, id) })
}

// act makes a session action (ts.c.Pause, ts.c.Rotate, ...) that must answer 200.
func (ts *testServer) act(action func(context.Context, string) (*client.Session, error), id string) *client.Session {
	ts.t.Helper()
	return must(ts.t, 200, "action on "+id, func(ctx context.Context) (*client.Session, error) { return action(ctx, id) })
}

// run runs code in a session and requires a 200 (the code may still have raised: see Status).
func (ts *testServer) run(id, code string) *client.RunResult {
	ts.t.Helper()
	return ts.runReq(id, client.RunRequest{Code: code})
}

// runReq is run with a whole request.
func (ts *testServer) runReq(id string, req client.RunRequest) *client.RunResult {
	ts.t.Helper()
	return must(ts.t, 200, "run in "+id, func(ctx context.Context) (*client.RunResult, error) { return ts.c.Run(ctx, id, req) })
}

// exec runs a command in a session and requires a 200.
func (ts *testServer) exec(id string, req client.ExecRequest) *client.ExecResult {
	ts.t.Helper()
	return must(ts.t, 200, "exec in "+id, func(ctx context.Context) (*client.ExecResult, error) { return ts.c.Exec(ctx, id, req) })
}

// getFile reads a workspace file (200).
func (ts *testServer) getFile(id, path string) []byte {
	ts.t.Helper()
	return must(ts.t, 200, "get file "+path, func(ctx context.Context) ([]byte, error) { return ts.c.GetFile(ctx, id, path) })
}

// events lists a session's events (200); see client.Events.
func (ts *testServer) events(id string, after int64, limit int, eventType string) []client.Event {
	ts.t.Helper()
	return must(ts.t, 200, "events of "+id, func(ctx context.Context) ([]client.Event, error) {
		return ts.c.Events(ctx, id, after, limit, eventType)
	})
}

// eventTypes lists the types of a session's events, oldest first.
func (ts *testServer) eventTypes(id string, limit int, eventType string) []string {
	ts.t.Helper()
	var out []string
	for _, e := range ts.events(id, 0, limit, eventType) {
		out = append(out, e.EventType)
	}
	return out
}

// metrics is the Prometheus text of /metrics (200).
func (ts *testServer) metrics() string {
	ts.t.Helper()
	return must(ts.t, 200, "metrics", ts.c.Metrics)
}

// resultOf is the text/plain result of a run ("" when none, or no answer).
func resultOf(r *client.RunResult) string {
	if r == nil || r.Result == nil {
		return ""
	}
	return *r.Result
}

// dump shows a typed answer in a failure message.
func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ---- raw requests, for input the typed client would not send ----

// rawResp is an answer read without the typed client.
type rawResp struct {
	Status int
	Body   []byte
}

// raw sends a request exactly as given, for deliberately malformed input: the path is neither
// cleaned nor escaped (".." and %2e stay), and body ("" for none) is sent as is with the token and
// a JSON content type.
func (ts *testServer) raw(method, path, body string) rawResp {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ts.ctx(), method, ts.base+path, rd)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return rawResp{Status: res.StatusCode, Body: data}
}

// err is the answer as the typed client sees it: nil for a 2xx, else an *client.Error (with Code
// and Message only when the body has the API's error shape).
func (r rawResp) err() error {
	if r.Status >= 200 && r.Status <= 299 {
		return nil
	}
	var body struct {
		Error *client.ErrorBody `json:"error"`
	}
	if json.Unmarshal(r.Body, &body) != nil || body.Error == nil {
		return &client.Error{Status: r.Status, Message: "not an API error: " + string(r.Body)}
	}
	return &client.Error{Status: r.Status, Code: body.Error.Code, Message: body.Error.Message, Details: body.Error.Details}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func fmtSscan(s string, v any) (int, error) { return fmt.Sscan(s, v) }

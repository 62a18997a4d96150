package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/server"
)

const testToken = "test-token"

// testServer is a real carryover server on a loopback port with its own SQLite file.
type testServer struct {
	t    *testing.T
	dir  string
	srv  *server.Server
	base string
	done chan error
}

func testConfig(dir string) *configs.Config {
	cfg := configs.Default()
	cfg.DataDir = dir
	cfg.Server.Addr = "127.0.0.1:0"
	cfg.Auth.Token = testToken
	cfg.Pool.Size = 1
	cfg.Server.MaxBodyBytes = 1 << 20
	cfg.Server.ShutdownGraceSeconds = 10
	cfg.Sandbox.Enabled = false
	return cfg
}

// startServer starts a server on dir (a new temp dir when "").
func startServer(t *testing.T, dir string, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := testConfig(dir)
	for _, f := range tweak {
		f(cfg)
	}
	srv, err := server.New(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, dir: dir, srv: srv, base: "http://" + srv.Addr(), done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve() }()
	t.Cleanup(func() { ts.stop() })
	return ts
}

// stop shuts the server down gracefully (idempotent).
func (ts *testServer) stop() {
	if ts.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		ts.t.Errorf("shutdown: %v", err)
	}
	<-ts.done
	ts.srv = nil
}

// restart stops the server and starts a new one on the same data dir.
func (ts *testServer) restart() *testServer {
	ts.stop()
	return startServer(ts.t, ts.dir)
}

type resp struct {
	Status int
	Body   []byte
	JSON   map[string]any
}

func (r resp) str(path ...string) string {
	v := r.get(path...)
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// get walks a path of keys (and numeric indexes) into the JSON body.
func (r resp) get(path ...string) any {
	var cur any = r.JSON
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			var i int
			fmt.Sscanf(p, "%d", &i)
			if i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func (ts *testServer) do(method, path string, body any, hdr ...string) resp {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, ts.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	r := resp{Status: res.StatusCode, Body: data}
	_ = json.Unmarshal(data, &r.JSON)
	return r
}

// must asserts the status and returns the response.
func (ts *testServer) must(status int, method, path string, body any) resp {
	ts.t.Helper()
	r := ts.do(method, path, body)
	if r.Status != status {
		ts.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, status, r.Body)
	}
	return r
}

// run posts code to a session's /run and requires a 200.
func (ts *testServer) run(id, code string) resp {
	ts.t.Helper()
	return ts.must(200, "POST", "/api/sessions/"+id+"/run", map[string]any{"code": code})
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func fmtSscan(s string, v any) (int, error) { return fmt.Sscan(s, v) }

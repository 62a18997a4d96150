// Package js_test runs the Node client's tests (clients/js/test/, node's test runner) against a
// real server, so that `go test ./...` and `make test` cover the Node client too.
package js_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects the server's log for the failure report.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNodeClient builds cmd/carryover, serves it on a free loopback port without the sandbox and
// with a pool of one kernel, and runs `node --test test/` with CARRYOVER_URL and CARRYOVER_TOKEN:
// the StateSet coding-agent example, runs across turns, Python and API errors, streaming, files,
// fork and checkpoints.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the Node client's tests (every machine of this project has it): %v", err)
	}
	jsDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(jsDir))
	tmp := t.TempDir()

	bin := filepath.Join(tmp, "carryover")
	build := exec.Command("go", "build", "-o", bin, "./cmd/carryover")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/carryover: %v\n%s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "t"

	var serverLog syncBuffer
	srv := exec.Command(bin, "serve", "--data_dir", filepath.Join(tmp, "data"), "--server.addr", addr,
		"--auth.token", token, "--pool.size", "1")
	srv.Dir = tmp
	srv.Env = append(os.Environ(), "CARRYOVER_SANDBOX_ENABLED=false")
	srv.Stdout = &serverLog
	srv.Stderr = &serverLog
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-srv.Process.Pid, syscall.SIGKILL) // the server and any kernel it left behind
			<-exited
		}
		if t.Failed() {
			t.Logf("server log:\n%s", serverLog.String())
		}
	})

	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the server exited before answering /healthz: %v\n%s", err, serverLog.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no /healthz answer from %s in 30 s (last error %v)\n%s", base, err, serverLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "test/")
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(), "CARRYOVER_URL="+base, "CARRYOVER_TOKEN="+token)
	if !hasGlobalWebSocket(node) {
		// Node 20 and 21 have the global WebSocket behind this flag (Node 22 on: always).
		cmd.Env = append(cmd.Env, "NODE_OPTIONS="+strings.TrimSpace(os.Getenv("NODE_OPTIONS")+" --experimental-websocket"))
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	if err != nil {
		t.Fatalf("node --test test/: %v\n%s", err, out.String())
	}
	t.Logf("node --test test/:\n%s", out.String())
}

// hasGlobalWebSocket says whether node has the WebSocket global without flags.
func hasGlobalWebSocket(node string) bool {
	out, err := exec.Command(node, "-e", "process.stdout.write(typeof WebSocket)").Output()
	return err == nil && string(out) == "function"
}

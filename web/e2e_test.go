package web_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

const chromium = "/usr/bin/chromium"

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

// TestBrowserUI builds the real server, starts it on a free port and runs web/e2e/ui.test.mjs in Debian's
// chromium through playwright-core: create a session, print and plot, reload and see the history,
// upload a file and read it from code, see the skipped-generator notice, and more. Screenshots are
// saved to web/e2e/screenshots/ and their paths printed.
func TestBrowserUI(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s not installed (make deps installs it; in CI this test must run)", chromium)
		}
		t.Fatalf("%s is required in CI: %v", chromium, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the browser test: %v", err)
	}
	webDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is not installed: run `make web-deps` (cd web && npm install): %v", err)
	}
	root := filepath.Dir(webDir)
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
	token := "e2e-token-0123456789"
	dataDir := filepath.Join(tmp, "data")

	var serverLog syncBuffer
	srv := exec.Command(bin, "serve", "--server.addr", addr, "--data_dir", dataDir, "--auth.token", token)
	srv.Dir = tmp
	srv.Stdout = &serverLog
	srv.Stderr = &serverLog
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(os.Interrupt)
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
			if res.StatusCode == 200 {
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
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	shots := filepath.Join(webDir, "e2e", "screenshots")
	cmd := exec.CommandContext(ctx, node, filepath.Join(webDir, "e2e", "ui.test.mjs"))
	cmd.Dir = webDir
	cmd.Env = append(os.Environ(), "CARRYOVER_URL="+base, "CARRYOVER_TOKEN="+token, "SCREENSHOT_DIR="+shots)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	t.Logf("node e2e/ui.test.mjs:\n%s", out.String())
	if err != nil {
		t.Fatal(fmt.Errorf("the browser test failed: %w", err))
	}
}

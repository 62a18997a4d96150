// Package binserver starts the real carryover binary for tests of clients that live outside Go (the
// browser UI, the Node client): it builds ./cmd/carryover, serves it on a free loopback port with
// its own data dir, waits for /healthz, and stops it (and any kernel it left) when the test ends.
package binserver

import (
	"bytes"
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

// Server is a running carryover binary.
type Server struct {
	Base  string // http://127.0.0.1:PORT
	Token string
	log   syncBuffer
}

// Log is what the server printed so far.
func (s *Server) Log() string { return s.log.String() }

// Start builds cmd/carryover from the module at root and serves it with token and extra flags and
// environment (e.g. --pool.size 1, CARRYOVER_SANDBOX_ENABLED=false).
func Start(t testing.TB, root, token string, flags, env []string) *Server {
	t.Helper()
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
	s := &Server{Base: "http://" + addr, Token: token}
	args := append([]string{"serve", "--server.addr", addr, "--data_dir", filepath.Join(tmp, "data"), "--auth.token", token}, flags...)
	srv := exec.Command(bin, args...)
	srv.Dir = tmp
	srv.Env = append(os.Environ(), env...)
	srv.Stdout, srv.Stderr = &s.log, &s.log
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
			t.Logf("server log:\n%s", s.log.String())
		}
	})
	s.waitHealthy(t, exited)
	return s
}

// waitHealthy waits up to 30 s for /healthz, failing at once if the server exits.
func (s *Server) waitHealthy(t testing.TB, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(s.Base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the server exited before answering /healthz: %v\n%s", err, s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no /healthz answer from %s in 30 s (last error %v)\n%s", s.Base, err, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer the server process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

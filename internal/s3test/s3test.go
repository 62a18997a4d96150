// Package s3test runs a real S3-compatible server for tests: Versity Gateway (versitygw, posix
// backend) on a loopback port over a temporary directory. The binary is built once by the Makefile
// (`make tools`) into a cache outside carryover's go.mod, $HOME/.cache/carryover-tools/bin; the
// CARRYOVER_VERSITYGW variable names another one.
package s3test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/freeport"
)

// Access and secret key of the test gateway's root user.
const (
	AccessKey = "carryovertest"
	SecretKey = "carryovertestsecret"
)

// Server is one running gateway.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Addr     string
	dir      string
	cmd      *exec.Cmd
	done     chan struct{}
}

// Binary is the versitygw to run.
func Binary() (string, error) {
	if p := os.Getenv("CARRYOVER_VERSITYGW"); p != "" {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(home, ".cache", "carryover-tools", "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("s3test: no versitygw at %s: `make tools` builds it (%v)", p, err)
	}
	return p, nil
}

// Start runs a gateway over a new directory under parent ("" = the system temp dir).
func Start(parent string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "s3test-")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"data", "meta"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://" + addr, Addr: addr, dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--port", addr, "--access", AccessKey, "--secret", SecretKey, "--quiet",
		"posix", "--sidecar", filepath.Join(dir, "meta"), filepath.Join(dir, "data"))
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("s3test: start versitygw: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(s.Endpoint + "/")
		if err == nil {
			res.Body.Close()
			return s, nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
			return nil, fmt.Errorf("s3test: versitygw exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("s3test: versitygw not answering after 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PID is the gateway's process id (the bench reads its CPU time).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop ends the gateway and removes its directory.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
	bucketSeq  int
	bucketMu   sync.Mutex
)

// Shared returns the package run's gateway, starting it on first use; Main stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start("") })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// NewBucket names a bucket no other test of the run uses (the store creates it).
func NewBucket() string {
	bucketMu.Lock()
	defer bucketMu.Unlock()
	bucketSeq++
	return fmt.Sprintf("t%d-%d", os.Getpid(), bucketSeq)
}

// Main stops the shared gateway after the tests; call it from TestMain after m.Run.
func Main() {
	if shared != nil {
		shared.Stop()
	}
}

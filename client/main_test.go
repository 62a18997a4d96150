package client_test

// These tests run against the real server: TestMain builds cmd/carryover once (or uses the binary
// named by CARRYOVER_TEST_BIN, e.g. to keep testing while the server's packages do not build),
// starts it on a free loopback port with a temporary data dir, no sandbox and a warm pool of one
// kernel (Debian's /usr/bin/python3, the config default), and stops it with SIGTERM at the end.
// Every test makes its own sessions on that one server.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

const testToken = "testtoken"

var (
	baseURL string
	api     *client.Client
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "carryover-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin, err := serverBinary(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := startServer(bin, tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	api = client.New(baseURL, testToken)
	return m.Run()
}

// serverBinary returns $CARRYOVER_TEST_BIN, or builds ./cmd/carryover from the module root.
func serverBinary(tmp string) (string, error) {
	if bin := os.Getenv("CARRYOVER_TEST_BIN"); bin != "" {
		return bin, nil
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(tmp, "carryover")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/carryover")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the server: %v\n%s", err, out)
	}
	return bin, nil
}

// startServer starts the server and waits for /healthz; stop sends SIGTERM and waits.
func startServer(bin, dataDir string) (stop func(), err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	baseURL = "http://" + addr
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", "--data_dir", dataDir, "--server.addr", addr,
		"--auth.token", testToken, "--pool.size", "1")
	cmd.Env = append(os.Environ(), "CARRYOVER_SANDBOX_ENABLED=false")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if err := waitHealthy(exited); err != nil {
		stop()
		return nil, fmt.Errorf("%v; server output:\n%s", err, logs.String())
	}
	return stop, nil
}

func waitHealthy(exited <-chan error) error {
	c := client.New(baseURL, "")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("server exited at start: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Health(ctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("server not healthy at %s after 60s", baseURL)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

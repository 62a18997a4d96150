package server_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reconnectRounds is how many kill -9 + restarts TestJupyterReconnectRounds puts one JupyterLab
// connection through: 5 in make test (~5-10 s each on the shared 2-core machine), the 20 of issue
// 37 with CARRYOVER_TEST_JUPYTER_ROUNDS=20.
func reconnectRounds(t *testing.T) int {
	if v := os.Getenv("CARRYOVER_TEST_JUPYTER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CARRYOVER_TEST_JUPYTER_ROUNDS=%q: want a count", v)
		}
		return n
	}
	return 5
}

// TestJupyterReconnectRounds keeps one KernelConnection of @jupyterlab/services through rounds of
// kill -9 + restart of carryover (server/jupyter/testdata/node/reconnect.mjs): the connection comes
// back by itself and its next cell is answered with the state from before; the counting request
// sent again with its msg_id is answered from the record, not run twice; no message carries
// carryover's own session. The client is stopped (SIGSTOP) while the server restarts, so its first
// reconnect attempt meets the new server (otherwise the library waits 10-30 s before its second).
func TestJupyterReconnectRounds(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs(filepath.Join("jupyter", "testdata", "node"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@jupyterlab", "services")); err != nil {
		t.Fatalf("@jupyterlab/services is not installed: run `make web-deps`: %v", err)
	}
	rounds := reconnectRounds(t)
	srv := startBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rounds)*time.Minute+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "reconnect.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE="+srv.Base, "TOKEN="+testToken, "ROUNDS="+strconv.Itoa(rounds))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if line != "KILL" {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGSTOP)
		srv.Kill9()
		srv.Restart(t)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_, _ = stdin.Write([]byte("restarted\n"))
	}
	err := cmd.Wait()
	out := strings.Join(lines, "\n") + "\n" + stderr.String()
	if err != nil || len(lines) == 0 || lines[len(lines)-1] != "OK" {
		t.Fatalf("the client failed (%v):\n%s", err, out)
	}
	t.Logf("%d rounds:\n%s", rounds, out)
}

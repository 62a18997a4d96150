package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/servertest"
)

// TestJupyterNodeClient drives /jupyter/ with JupyterLab's own client library, @jupyterlab/services
// (server/jupyter/testdata/node/client.mjs): session, streaming, stdin, a comm echo with binary
// buffers, interrupt, restart; then carryover is killed with SIGKILL (kernels included) and started
// again on the same port and data dir: a fresh client finds the session and kernel with x, and the
// first client's kernel connection reconnects by itself and continues. Its shutdown closes the
// session and keeps its state.
func TestJupyterNodeClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the Jupyter client test (every machine of this project has it): %v", err)
	}
	dir, _ := filepath.Abs(filepath.Join("jupyter", "testdata", "node"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@jupyterlab", "services")); err != nil {
		t.Fatalf("@jupyterlab/services is not installed: run `make web-deps` (cd server/jupyter/testdata/node && npm install): %v", err)
	}
	srv := startBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE="+srv.Base, "TOKEN="+testToken)
	lines, kernelID, err := runKillScript(t, cmd, srv)
	t.Logf("node client:\n%s", lines)
	if err != nil {
		t.Fatalf("node client failed: %v", err)
	}
	// Jupyter's shutdown closed the session; its state is still in carryover.
	var got struct {
		Session struct {
			State          string `json:"state"`
			LastCheckpoint *struct {
				ID string `json:"id"`
			} `json:"last_checkpoint"`
		} `json:"session"`
	}
	getJSON(t, srv.Base+"/api/sessions/"+kernelID, &got)
	if got.Session.State != "completed" || got.Session.LastCheckpoint == nil {
		t.Fatalf("after Jupyter's shutdown: %+v, want completed with a checkpoint", got.Session)
	}
	var cps struct {
		Checkpoints []struct {
			Variables []string `json:"variables"`
		} `json:"checkpoints"`
	}
	getJSON(t, srv.Base+"/api/sessions/"+kernelID+"/checkpoints", &cps)
	if len(cps.Checkpoints) == 0 || !contains(cps.Checkpoints[0].Variables, "x") {
		t.Fatalf("the final checkpoint does not hold x: %+v", cps)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// runKillScript runs a client script that prints "KERNEL <id>", then "KILL" and waits for a line on
// stdin: the test kills the server with SIGKILL, starts it again and answers. It returns what the
// script printed (stdout, then stderr), the kernel id, and an error unless it exited 0 with "OK" last.
func runKillScript(t *testing.T, cmd *exec.Cmd, srv *servertest.Process) (string, string, error) {
	t.Helper()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	kernelID := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		switch {
		case strings.HasPrefix(line, "KERNEL "):
			kernelID = strings.TrimPrefix(line, "KERNEL ")
		case line == "KILL":
			srv.Kill9()
			srv.Restart(t)
			_, _ = stdin.Write([]byte("restarted\n"))
		}
	}
	err := cmd.Wait()
	out := strings.Join(lines, "\n") + "\n" + stderr.String()
	if err == nil && (len(lines) == 0 || lines[len(lines)-1] != "OK") {
		err = fmt.Errorf("the script did not end with OK")
	}
	return out, kernelID, err
}

// TestJupyterNodeTurns drives /jupyter/ with JupyterLab's client library through errors and restores
// (server/jupyter/testdata/node/turns.mjs): an interrupted cell and a `1/0` are checkpointed and the
// cells after them run; a cell sent right after a hibernation wakes the kernel with its state and is
// told which comm was lost; a cell sent during a rotation runs; and across a kill -9 + restart, a
// cell sent the moment the same connection is connected again is answered with the state from before.
func TestJupyterNodeTurns(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs(filepath.Join("jupyter", "testdata", "node"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@jupyterlab", "services")); err != nil {
		t.Fatalf("@jupyterlab/services is not installed: run `make web-deps` (cd server/jupyter/testdata/node && npm install): %v", err)
	}
	srv := startBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "turns.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE="+srv.Base, "TOKEN="+testToken)
	lines, _, err := runKillScript(t, cmd, srv)
	if err != nil {
		t.Fatalf("node client failed: %v\n%s", err, lines)
	}
}

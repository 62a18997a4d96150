package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/freeport"
)

const python = "/usr/bin/python3"

// TestJupyterServerGateway puts Debian's jupyter_server 1.23 (--gateway-url) in front of carryover:
// carryover's kernelspecs are listed, a kernel started through it runs code over jupyter_server's
// websocket and keeps its variables through a kill -9 and restart of carryover, and jupyter_server's
// exit (which DELETEs its kernels) closes the session with its state kept in carryover.
func TestJupyterServerGateway(t *testing.T) {
	t.Parallel()
	root, _ := filepath.Abs("..")
	srv := startBinary(t)
	js, jsURL := startJupyterServer(t, srv.Base+"/jupyter")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	script := filepath.Join(root, "server", "jupyter", "testdata", "python", "gateway_client.py")
	cmd := exec.CommandContext(ctx, python, script, jsURL, "jstoken", srv.Base, testToken)
	lines, kernelID, err := runKillScript(t, cmd, srv)
	t.Logf("gateway client:\n%s", lines)
	if err != nil {
		t.Fatalf("gateway client failed: %v\njupyter_server log:\n%s", err, js.log.String())
	}
	js.stop(t) // its exit DELETEs the kernels it started
	var got struct {
		Session struct {
			State string `json:"state"`
		} `json:"session"`
	}
	getJSON(t, srv.Base+"/api/sessions/"+kernelID, &got)
	if got.Session.State != "completed" {
		t.Fatalf("after jupyter_server's exit the session is %q, want completed (closed by its DELETE)\njupyter_server log:\n%s", got.Session.State, js.log.String())
	}
	var cps struct {
		Checkpoints []struct {
			Variables []string `json:"variables"`
		} `json:"checkpoints"`
	}
	getJSON(t, srv.Base+"/api/sessions/"+kernelID+"/checkpoints", &cps)
	if len(cps.Checkpoints) == 0 || !contains(cps.Checkpoints[0].Variables, "x") {
		t.Fatalf("the state did not survive jupyter_server's exit: %+v", cps)
	}
}

// TestJupyterNBClient executes a notebook with nbclient through jupyter_server's GatewayKernelManager
// (its websocket carries the token in the path): outputs of every kind come back in order, and
// nbclient's shutdown of the kernel leaves carryover's session closed, not deleted.
func TestJupyterNBClient(t *testing.T) {
	t.Parallel()
	root, _ := filepath.Abs("..")
	srv := startBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	script := filepath.Join(root, "server", "jupyter", "testdata", "python", "nbclient_run.py")
	cmd := exec.CommandContext(ctx, python, script, srv.Base, testToken)
	cmd.Env = append(os.Environ(), jupyterDirs(t.TempDir())...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nbclient: %v\n%s", err, out)
	}
	var nb struct {
		Cells []struct {
			ExecutionCount int               `json:"execution_count"`
			Outputs        []json.RawMessage `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(out, &nb); err != nil {
		t.Fatalf("nbclient output: %v\n%s", err, out)
	}
	want := []string{`"text/plain":["5"]`, `"text":["6.146\n"]`, `"text/html":["<b>bold</b>"]`}
	for i, w := range want {
		if i >= len(nb.Cells) || nb.Cells[i].ExecutionCount != i+1 || len(nb.Cells[i].Outputs) != 1 || !strings.Contains(compact(nb.Cells[i].Outputs[0]), w) {
			t.Fatalf("cell %d: want an output with %s, got %s", i+1, w, out)
		}
	}
	var kernels []map[string]any
	getJSON(t, srv.Base+"/jupyter/api/kernels", &kernels)
	if len(kernels) != 0 {
		t.Fatalf("nbclient shut its kernel down, but it is still listed: %v", kernels)
	}
}

func compact(raw json.RawMessage) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return b.String()
}

// jupyterDirs keeps jupyter_server's runtime, data and config files in dir.
func jupyterDirs(dir string) []string {
	return []string{"JUPYTER_RUNTIME_DIR=" + filepath.Join(dir, "runtime"), "JUPYTER_DATA_DIR=" + filepath.Join(dir, "data"),
		"JUPYTER_CONFIG_DIR=" + filepath.Join(dir, "config"), "JUPYTER_PLATFORM_DIRS=1"}
}

type jupyterServer struct {
	cmd *exec.Cmd
	log syncLog
}

// startJupyterServer runs Debian's jupyter_server with --gateway-url=gateway on a free port.
func startJupyterServer(t *testing.T, gateway string) (*jupyterServer, string) {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	js := &jupyterServer{}
	js.cmd = exec.Command(python, "-m", "jupyter_server", "--allow-root", "--no-browser", "--ip=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--ServerApp.token=jstoken", "--ServerApp.root_dir="+dir, "--gateway-url="+gateway, "--GatewayClient.auth_token="+testToken)
	js.cmd.Env = append(os.Environ(), jupyterDirs(dir)...)
	js.cmd.Stdout, js.cmd.Stderr = &js.log, &js.log
	js.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := js.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.stop(t) })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(base + "/api/status?token=jstoken")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return js, base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jupyter_server did not start: %v\n%s", err, js.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop sends SIGTERM, as a user's Ctrl-C would, and waits for jupyter_server's exit (it DELETEs its
// kernels first).
func (js *jupyterServer) stop(t *testing.T) {
	if js.cmd == nil || js.cmd.Process == nil {
		return
	}
	_ = js.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- js.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-js.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Errorf("jupyter_server ignored SIGTERM for 60 s")
	}
	js.cmd = nil
}

// syncLog is a log a subprocess writes while the test reads it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

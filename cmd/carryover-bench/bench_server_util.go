package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/server"
)

// Helpers of the server section: an in-process carryover server, its HTTP and websocket clients, and
// Debian's Jupyter Server as the peer.

func benchRandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// benchSrv is a real carryover server on a loopback port, with its own data dir under the scratch dir.
type benchSrv struct {
	srv     *server.Server
	base    string
	token   string
	done    chan error
	hc      *http.Client
	logf    *os.File
	stopped bool
}

// startBenchSrv starts a server as `carryover serve` would, sandbox off (see the row notes).
func startBenchSrv(ctx context.Context, env *benchEnv, name string, tweak func(*configs.Config)) (*benchSrv, error) {
	c := *env.Cfg
	c.DataDir = filepath.Join(env.Scratch, "server-"+name)
	c.Server.Addr = "127.0.0.1:0"
	c.Auth.Token = benchRandHex(16)
	c.Sandbox.Enabled = false
	if c.Kernel.Python == "" {
		c.Kernel.Python = "/usr/bin/python3"
	}
	// Dozens of kernels starting at once on few cores take longer than one.
	c.Kernel.StartupTimeoutSeconds = max(c.Kernel.StartupTimeoutSeconds, 120)
	c.Server.ShutdownGraceSeconds = 10
	if tweak != nil {
		tweak(&c)
	}
	logf, err := os.Create(filepath.Join(env.Scratch, "server-"+name+".log"))
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(ctx, &c, nil, log)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("server.New: %w", err)
	}
	if err := srv.Listen(); err != nil {
		logf.Close()
		return nil, err
	}
	h := &benchSrv{srv: srv, base: "http://" + srv.Addr(), token: c.Auth.Token, done: make(chan error, 1), logf: logf,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}}}
	go func() { h.done <- srv.Serve() }()
	return h, nil
}

// stop shuts the server down gracefully (idempotent) and returns the ERROR lines it logged.
func (h *benchSrv) stop() (errLines []string, err error) {
	if h.stopped {
		return nil, nil
	}
	h.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = h.srv.Shutdown(ctx)
	if serr := <-h.done; err == nil {
		err = serr
	}
	h.hc.CloseIdleConnections()
	h.logf.Close()
	b, _ := os.ReadFile(h.logf.Name())
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errLines = append(errLines, l)
		}
	}
	return errLines, err
}

// call sends one API request and decodes the answer into out (nil: discard); the duration covers
// sending the request and reading the whole answer body.
func (h *benchSrv) call(ctx context.Context, method, path string, body, out any) (time.Duration, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	res, err := h.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		return d, fmt.Errorf("%s %s: HTTP %d: %s", method, path, res.StatusCode, benchClip(string(b), 300))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return d, fmt.Errorf("%s %s: answer: %w", method, path, err)
		}
	}
	return d, nil
}

func benchClip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// createSession makes a pending session and returns its id.
func (h *benchSrv) createSession(ctx context.Context) (string, time.Duration, error) {
	var out struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	d, err := h.call(ctx, "POST", "/api/sessions", map[string]any{}, &out)
	if err == nil && out.Session.ID == "" {
		err = errors.New("POST /api/sessions: no session id in the answer")
	}
	return out.Session.ID, d, err
}

// runAnswer is the part of the /run answer (and of the websocket result frame) the bench checks.
type runAnswer struct {
	Status  string  `json:"status"`
	Stdout  string  `json:"stdout"`
	Result  *string `json:"result"`
	Outputs []struct {
		Type string `json:"type"`
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"outputs"`
	Error           json.RawMessage             `json:"error"`
	DurationMS      float64                     `json:"duration_ms"`
	Checkpoint      *carryover.CheckpointResult `json:"checkpoint"`
	CheckpointError string                      `json:"checkpoint_error"`
}

func (h *benchSrv) run(ctx context.Context, id, code string) (time.Duration, *runAnswer, error) {
	var a runAnswer
	d, err := h.call(ctx, "POST", "/api/sessions/"+id+"/run", map[string]any{"code": code}, &a)
	return d, &a, err
}

// coWS is one websocket client of a carryover session.
type coWS struct {
	c   *websocket.Conn
	seq int
}

func (h *benchSrv) dialWS(ctx context.Context, id string) (*coWS, error) {
	u := "ws://" + strings.TrimPrefix(h.base, "http://") + "/api/sessions/" + id + "/ws"
	c, _, err := websocket.DefaultDialer.DialContext(ctx, u, http.Header{"Authorization": {"Bearer " + h.token}})
	if err != nil {
		return nil, fmt.Errorf("websocket %s: %w", u, err)
	}
	return &coWS{c: c}, nil
}

// run sends a run frame and reads until that run's `status idle` (sent after the result, so the
// turn, checkpoint included, is over). It returns the result and the texts of the stream output frames.
func (w *coWS) run(code string) (time.Duration, *runAnswer, []string, error) {
	w.seq++
	id := "b" + strconv.Itoa(w.seq)
	t0 := time.Now()
	if err := w.c.WriteJSON(map[string]any{"type": "run", "id": id, "code": code}); err != nil {
		return 0, nil, nil, err
	}
	_ = w.c.SetReadDeadline(time.Now().Add(5 * time.Minute))
	var ans *runAnswer
	var streams []string
	for {
		_, data, err := w.c.ReadMessage()
		if err != nil {
			return 0, nil, nil, fmt.Errorf("websocket read: %w", err)
		}
		var f struct {
			Type   string `json:"type"`
			ID     string `json:"id"`
			State  string `json:"execution_state"`
			Output *struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"output"`
			Result *runAnswer      `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return 0, nil, nil, fmt.Errorf("websocket frame %q: %w", benchClip(string(data), 200), err)
		}
		if f.ID != id {
			continue
		}
		switch f.Type {
		case "output":
			if f.Output != nil && f.Output.Type == "stream" {
				streams = append(streams, f.Output.Text)
			}
		case "result":
			ans = f.Result
		case "error":
			return 0, nil, nil, fmt.Errorf("websocket error frame: %s", f.Error)
		case "status":
			if f.State != "idle" {
				continue
			}
			d := time.Since(t0)
			if ans == nil {
				return d, nil, streams, errors.New("websocket: idle before any result frame")
			}
			return d, ans, streams, nil
		}
	}
}

func (w *coWS) close() {
	_ = w.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = w.c.Close()
}

// jupyterPeer is Debian's Jupyter Server (`python3 -m jupyter_server`) with token auth on loopback,
// one kernel and one websocket on its channels, isolated in a scratch dir (runtime, config, data,
// IPython dir, HOME and root dir), so nothing of the user's is read or written.
type jupyterPeer struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	dir      string
	base     string
	token    string
	logPath  string
	kernelID string
	session  string
	ws       *websocket.Conn
	seq      int
	Version  string
}

func benchFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startJupyterPeer(ctx context.Context, scratch, python string) (*jupyterPeer, error) {
	dir := filepath.Join(scratch, "jupyter")
	sub := func(s string) string { return filepath.Join(dir, s) }
	for _, d := range []string{"root", "runtime", "config", "data", "ipython"} {
		if err := os.MkdirAll(sub(d), 0o700); err != nil {
			return nil, err
		}
	}
	port, err := benchFreePort()
	if err != nil {
		return nil, err
	}
	j := &jupyterPeer{dir: dir, base: fmt.Sprintf("http://127.0.0.1:%d", port), token: benchRandHex(16),
		logPath: sub("jupyter_server.log"), session: benchRandHex(16), exited: make(chan struct{})}
	if out, err := exec.CommandContext(ctx, python, "-c", "import jupyter_server; print(jupyter_server.__version__)").Output(); err == nil {
		j.Version = strings.TrimSpace(string(out))
	}
	logf, err := os.Create(j.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(python, "-m", "jupyter_server",
		"--ServerApp.token="+j.token, fmt.Sprintf("--port=%d", port), "--ip=127.0.0.1", "--ServerApp.port_retries=0",
		"--no-browser", "--ServerApp.open_browser=False", "--allow-root", "--ServerApp.root_dir="+sub("root"))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8",
		"JUPYTER_RUNTIME_DIR=" + sub("runtime"), "JUPYTER_CONFIG_DIR=" + sub("config"), "JUPYTER_DATA_DIR=" + sub("data"),
		"IPYTHONDIR=" + sub("ipython"), "PYDEVD_DISABLE_FILE_VALIDATION=1"}
	cmd.Dir = sub("root")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jupyter_server: %w", err)
	}
	j.cmd = cmd
	go func() { _ = cmd.Wait(); close(j.exited) }()

	deadline := time.Now().Add(90 * time.Second)
	for {
		if err := j.call(ctx, "GET", "/api/status", nil, nil); err == nil {
			break
		}
		select {
		case <-j.exited:
			return nil, fmt.Errorf("jupyter_server exited at start:\n%s", j.logTail())
		case <-ctx.Done():
			j.close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			j.close()
			return nil, fmt.Errorf("jupyter_server not answering after 90 s:\n%s", j.logTail())
		}
	}
	var k struct {
		ID string `json:"id"`
	}
	if err := j.call(ctx, "POST", "/api/kernels", map[string]any{"name": "python3"}, &k); err != nil {
		j.close()
		return nil, err
	}
	j.kernelID = k.ID
	u := fmt.Sprintf("ws://127.0.0.1:%d/api/kernels/%s/channels?session_id=%s", port, k.ID, j.session)
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, u, http.Header{"Authorization": {"token " + j.token}})
	if err != nil {
		j.close()
		return nil, fmt.Errorf("jupyter_server websocket: %w", err)
	}
	j.ws = ws
	return j, nil
}

func (j *jupyterPeer) logTail() string {
	b, _ := os.ReadFile(j.logPath)
	return benchClip(string(b[max(0, len(b)-2000):]), 2000)
}

func (j *jupyterPeer) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, j.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "token "+j.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("jupyter_server %s %s: HTTP %d: %s", method, path, res.StatusCode, benchClip(string(b), 300))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// execute sends an execute_request over the kernel's channels websocket (Jupyter's JSON message
// format) and waits for both its execute_reply and the iopub status idle with that parent; it
// returns the execute_result's text/plain.
func (j *jupyterPeer) execute(code string) (time.Duration, string, error) {
	j.seq++
	msgID := fmt.Sprintf("%s_%d", j.session, j.seq)
	msg := map[string]any{
		"header": map[string]any{"msg_id": msgID, "msg_type": "execute_request", "session": j.session,
			"username": "bench", "version": "5.3", "date": time.Now().UTC().Format(time.RFC3339Nano)},
		"parent_header": map[string]any{},
		"metadata":      map[string]any{},
		"content": map[string]any{"code": code, "silent": false, "store_history": true, "user_expressions": map[string]any{},
			"allow_stdin": false, "stop_on_error": true},
		"channel": "shell",
		"buffers": []any{},
	}
	t0 := time.Now()
	if err := j.ws.WriteJSON(msg); err != nil {
		return 0, "", err
	}
	_ = j.ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
	gotReply, gotIdle := false, false
	result := ""
	for !gotReply || !gotIdle {
		_, data, err := j.ws.ReadMessage()
		if err != nil {
			return 0, "", fmt.Errorf("jupyter_server websocket read: %w", err)
		}
		var m struct {
			Header struct {
				MsgType string `json:"msg_type"`
			} `json:"header"`
			Parent struct {
				MsgID string `json:"msg_id"`
			} `json:"parent_header"`
			Content struct {
				Status         string            `json:"status"`
				ExecutionState string            `json:"execution_state"`
				Data           map[string]string `json:"data"`
				EName          string            `json:"ename"`
				EValue         string            `json:"evalue"`
			} `json:"content"`
		}
		if err := json.Unmarshal(data, &m); err != nil || m.Parent.MsgID != msgID {
			continue // binary frames, other parents
		}
		switch m.Header.MsgType {
		case "execute_reply":
			if m.Content.Status != "ok" {
				return 0, "", fmt.Errorf("jupyter_server execute: %s %s: %s", m.Content.Status, m.Content.EName, m.Content.EValue)
			}
			gotReply = true
		case "status":
			gotIdle = gotIdle || m.Content.ExecutionState == "idle"
		case "execute_result":
			result = m.Content.Data["text/plain"]
		}
	}
	return time.Since(t0), result, nil
}

// close deletes the kernel, asks the server to shut down, and kills its process group if it lingers.
func (j *jupyterPeer) close() {
	if j.ws != nil {
		_ = j.ws.Close()
	}
	ctx := context.Background()
	if j.kernelID != "" {
		_ = j.call(ctx, "DELETE", "/api/kernels/"+j.kernelID, nil, nil)
	}
	_ = j.call(ctx, "POST", "/api/shutdown", nil, nil)
	select {
	case <-j.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-j.exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
			<-j.exited
		}
	}
}

// benchKernelProcs lists the live ipykernel processes this bench is responsible for: children of this
// process (carryover's kernels, raw kernel/ ones) and those whose command line names dir (Jupyter
// Server's kernels get their connection file in its runtime dir under the scratch dir).
func benchKernelProcs(dir string) []int {
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("ipykernel")) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if ppid == self || (dir != "" && bytes.Contains(cmdline, []byte(dir))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procCPU is this process's user+system CPU time so far.
func procCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startServerProfile, when CARRYOVER_BENCH_SERVER_PROFILE names a file prefix, writes a CPU profile
// (prefix-tag.cpu.pprof) and, withTrace, an execution trace (prefix-tag.trace) of one phase, for
// `go tool pprof` / `go tool trace`. The returned func stops them.
func startServerProfile(tag string, withTrace bool) (func(), error) {
	prefix := os.Getenv("CARRYOVER_BENCH_SERVER_PROFILE")
	if prefix == "" {
		return func() {}, nil
	}
	cf, err := os.Create(prefix + "-" + tag + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cf); err != nil {
		cf.Close()
		return nil, err
	}
	stop := func() {
		pprof.StopCPUProfile()
		cf.Close()
	}
	if !withTrace {
		return stop, nil
	}
	tf, err := os.Create(prefix + "-" + tag + ".trace")
	if err != nil {
		stop()
		return nil, err
	}
	if err := trace.Start(tf); err != nil {
		stop()
		tf.Close()
		return nil, err
	}
	return func() {
		trace.Stop()
		tf.Close()
		stop()
	}, nil
}

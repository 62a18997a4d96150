package bench

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
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/freeport"
	"github.com/carryover/carryover/internal/servertest"
	"github.com/carryover/carryover/kernel/sandbox"
	"github.com/carryover/carryover/web"
)

// Helpers of the server section: an in-process carryover server, its HTTP and websocket clients, and
// Debian's Jupyter Server as the peer.

func benchRandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// benchSrv is a real carryover server on a loopback port (internal/servertest's, in this process),
// with its own data dir under the scratch dir.
type benchSrv struct {
	srv     *servertest.Server
	base    string
	token   string
	hc      *http.Client
	c       *client.Client // the typed client every call goes through
	logf    *os.File
	stopped bool
	sandbox bool // the server's sandbox.enabled
	quick   bool // the run's quick mode: settle waits a tenth
}

// settle waits d for the server to settle between measurements (a pool refill, kernels' starts);
// in quick mode, where the figures mean little, a tenth of it.
func (h *benchSrv) settle(d time.Duration) {
	if h.quick {
		d /= 10
	}
	time.Sleep(d)
}

// benchStartupTimeout bounds every kernel start of the bench (its servers' and its own): dozens of
// kernels starting at once on few cores, or beside other sections (the smoke test runs several at
// a time), take longer than one; the default 30 s is for a node serving users. It only guards
// against a hang: the starts the bench measures take a second or two.
const benchStartupTimeout = 120 * time.Second

// benchSrvSeq numbers the bench's servers (see nextBenchUIDBase).
var benchSrvSeq atomic.Int32

// nextBenchUIDBase is the first sandbox uid of the next server: each has its own range of 10,000,
// so two at once never share a uid (a box's strays are found by uid).
func nextBenchUIDBase() int { return 300000 + 20000*int(benchSrvSeq.Add(1)) }

// benchSandboxOK says whether this host can run the sandbox (root, bubblewrap, namespaces).
var benchSandboxOK = sync.OnceValue(func() bool { return os.Geteuid() == 0 && sandbox.Probe("") == nil })

// sweepBenchUIDs kills what the bench's servers left under their sandbox uids (a node SIGKILLed by
// the failover rows can leave a box behind): a sandbox Manager over all their ranges does that as
// it starts (kernel/sandbox/leftovers.go). scratch holds its state dir.
func sweepBenchUIDs(scratch string) {
	n := int(benchSrvSeq.Load())
	if n == 0 || !benchSandboxOK() {
		return
	}
	m, err := sandbox.New(sandbox.Config{StateDir: filepath.Join(scratch, "sweep"), UIDBase: 300000, UIDCount: 20000 * (n + 1),
		NoCgroup: true, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err == nil {
		_ = m.Close()
	}
}

// sandboxNote says which sandbox setting a server's rows were measured with.
func (h *benchSrv) sandboxNote() string {
	if h.sandbox {
		return "sandbox on (the default)"
	}
	return "sandbox off"
}

// startBenchSrv starts a server as `carryover serve` would: the configured sandbox (on by default,
// as users run it) when this host can run it; tweak may turn it off (the row notes say).
func startBenchSrv(_ context.Context, env *benchEnv, name string, tweak func(*configs.Config)) (*benchSrv, error) {
	c := *env.Cfg
	c.DataDir = filepath.Join(env.Scratch, "server-"+name)
	c.Server.Addr = "127.0.0.1:0"
	c.Auth.Token = benchRandHex(16)
	c.Sandbox.Enabled = env.Cfg.Sandbox.Enabled && benchSandboxOK()
	c.Sandbox.UIDBase = nextBenchUIDBase()
	c.Sandbox.UIDCount = 10000
	if c.Kernel.Python == "" {
		c.Kernel.Python = "/usr/bin/python3"
	}
	c.Kernel.StartupTimeoutSeconds = max(c.Kernel.StartupTimeoutSeconds, benchStartupTimeout.Seconds())
	c.Server.ShutdownGraceSeconds = 10
	if tweak != nil {
		tweak(&c)
	}
	if env.Quick { // a pool of one at most, whatever the section asked for (see Run)
		c.Pool.Size, c.Pool.MaxSize = min(c.Pool.Size, 1), min(c.Pool.MaxSize, 1)
	}
	logf, err := os.Create(filepath.Join(env.Scratch, "server-"+name+".log"))
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := servertest.NewWithUI(&c, web.Handler(), log) // the UI too, as `carryover serve`
	if err != nil {
		logf.Close()
		return nil, err
	}
	h := &benchSrv{srv: srv, base: srv.Base, token: c.Auth.Token, logf: logf, sandbox: c.Sandbox.Enabled, quick: env.Quick,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}}}
	h.c = client.New(h.base, h.token, client.WithHTTPClient(h.hc))
	return h, nil
}

// stop shuts the server down gracefully (idempotent) and returns the ERROR lines it logged.
func (h *benchSrv) stop() (errLines []string, err error) {
	if h.stopped {
		return nil, nil
	}
	h.stopped = true
	err = h.srv.Stop()
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

func benchClip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// createSession makes a pending session and returns its id.
func (h *benchSrv) createSession(ctx context.Context) (string, time.Duration, error) {
	t0 := time.Now()
	s, err := h.c.CreateSession(ctx, client.CreateRequest{})
	d := time.Since(t0)
	if err != nil {
		return "", d, fmt.Errorf("POST /api/sessions: %w", err)
	}
	if s.ID == "" {
		return "", d, errors.New("POST /api/sessions: no session id in the answer")
	}
	return s.ID, d, nil
}

func (h *benchSrv) run(ctx context.Context, id, code string) (time.Duration, *client.RunResult, error) {
	t0 := time.Now()
	a, err := h.c.Run(ctx, id, client.RunRequest{Code: code})
	d := time.Since(t0)
	if a == nil {
		a = &client.RunResult{}
	}
	if err != nil {
		err = fmt.Errorf("POST /run: %w", err)
	}
	return d, a, err
}

// coWS is one websocket client of a carryover session.
type coWS struct {
	c   *client.Conn
	seq int
}

func (h *benchSrv) dialWS(ctx context.Context, id string) (*coWS, error) {
	c, err := h.c.Connect(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("websocket: %w", err)
	}
	return &coWS{c: c}, nil
}

// run sends a run frame and reads until that run's `status idle` (sent after the result, so the
// turn, checkpoint included, is over). It returns the result and the texts of the stream output frames.
func (w *coWS) run(code string) (time.Duration, *client.RunResult, []string, error) {
	w.seq++
	id := "b" + strconv.Itoa(w.seq)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	ans, frames, err := w.c.Run(ctx, id, code)
	d := time.Since(t0)
	if err != nil {
		return d, ans, nil, fmt.Errorf("websocket run: %w", err)
	}
	var streams []string
	for _, f := range frames {
		if f.Type == "output" && f.Output != nil && f.Output.Type == "stream" {
			streams = append(streams, f.Output.Text)
		}
	}
	return d, ans, streams, nil
}

func (w *coWS) close() { _ = w.c.Close() }

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

func startJupyterPeer(ctx context.Context, scratch, python string) (*jupyterPeer, error) {
	dir := filepath.Join(scratch, "jupyter")
	sub := func(s string) string { return filepath.Join(dir, s) }
	for _, d := range []string{"root", "runtime", "config", "data", "ipython"} {
		if err := os.MkdirAll(sub(d), 0o700); err != nil {
			return nil, err
		}
	}
	port, err := freeport.Port()
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

// call makes one REST call of the Jupyter API (carryover's door or Jupyter Server). Its limit is
// longer than benchStartupTimeout, as POST /api/kernels starts a kernel: a slow start is then
// answered by the server, with its own error, instead of cut by the client (at 30 s, the client
// gave up on a start the server was still allowed, on a loaded CI machine, and the server logged
// the cancelled request's writes).
func (j *jupyterPeer) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, benchStartupTimeout+30*time.Second)
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
		if ppid == self || templateOf(ppid, self) || (dir != "" && bytes.Contains(cmdline, []byte(dir))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// templateOf says whether pid is a kernel template (kernel/template) that is parent's child: the
// kernels it forks are parent's kernels.
func templateOf(pid, parent int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte("carryover_template")) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) >= 2 && f[1] == strconv.Itoa(parent)
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

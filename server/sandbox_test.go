package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/sandboxtest"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel/sandbox"
)

// These tests run the real server with the sandbox on (bubblewrap, cgroups where the host has them):
// isolation between sessions and from the host, the files API's confinement, and abuse that must end
// with a clear error while the session keeps working and other sessions stay untouched.

// sandboxed starts a server with the sandbox on, or skips where bubblewrap cannot run.
func sandboxed(t *testing.T, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	return sandboxedIn(t, "", tweak...)
}

// sandboxedIn is sandboxed on data dir dir ("": a new one), to restart a sandboxed server.
func sandboxedIn(t *testing.T, dir string, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	sandboxtest.Require(t, sandbox.Probe)
	return startServer(t, dir, sandboxOn(tweak)...)
}

// sandboxedOwnTemplate is sandboxed with kernel templates of the server's own (startServerOwnTemplate).
func sandboxedOwnTemplate(t *testing.T, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	sandboxtest.Require(t, sandbox.Probe)
	return startServerOwnTemplate(t, "", sandboxOn(tweak)...)
}

// sandboxOn is tweak after the sandbox suites' own settings.
func sandboxOn(tweak []func(*configs.Config)) []func(*configs.Config) {
	return append([]func(*configs.Config){func(c *configs.Config) {
		c.Sandbox.Enabled = true
		c.Sandbox.UIDBase = 240000
		c.Pool.Size = 2
	}}, tweak...)
}

// create makes a running session with the given sandbox settings (nil: the defaults).
func (ts *testServer) create(id string, sb *client.SandboxRequest) {
	ts.t.Helper()
	ts.newSession(client.CreateRequest{SessionID: id, Start: true, Sandbox: sb})
}

// runT runs code with a timeout (0: the default) and returns what came back whatever its status:
// the answer (also the partial one of a timeout or kernel death), the HTTP status, and the API
// error of a non-2xx. Any other error fails the test.
func (ts *testServer) runT(id, code string, timeout float64) (*client.RunResult, int, *client.Error) {
	ts.t.Helper()
	req := client.RunRequest{Code: code}
	if timeout > 0 {
		req.TimeoutSeconds = client.Seconds(timeout)
	}
	ctx, status := withStatus(ts.ctx())
	res, err := ts.c.Run(ctx, id, req)
	var apiErr *client.Error
	if err != nil && !errors.As(err, &apiErr) {
		ts.t.Fatalf("run in %s: %v", id, err)
	}
	return res, *status, apiErr
}

// stdout runs code that must succeed and returns its stdout, trimmed.
func (ts *testServer) stdout(id, code string) string {
	ts.t.Helper()
	r := ts.run(id, code)
	if r.Status != "ok" {
		ts.t.Fatalf("run %q in %s: %s", code, id, dump(r))
	}
	return strings.TrimSpace(r.Stdout)
}

// answer shows what runT got in a message.
func answer(res *client.RunResult, apiErr *client.Error) string {
	if apiErr != nil {
		return fmt.Sprintf("%v; partial answer %s", apiErr, dump(res))
	}
	return dump(res)
}

func TestSandboxIsolation(t *testing.T) {
	t.Parallel()
	cfgFile := filepath.Join(t.TempDir(), "carryover.yaml")
	if err := os.WriteFile(cfgFile, []byte("auth:\n  token: "+testToken+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := sandboxed(t)
	port := ts.base[strings.LastIndexByte(ts.base, ':')+1:]
	ts.create("a", nil)
	ts.create("b", nil)
	network := true
	ts.create("net", &client.SandboxRequest{Network: &network})
	must(t, 201, "put b's secret", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutFile(ctx, "b", "secret.txt", []byte("b's secret"))
	})
	bHost := filepath.Join(ts.dir, "workspaces", "b", "secret.txt")
	db := filepath.Join(ts.dir, "carryover.db")
	if !fileExists(db) || !fileExists(bHost) {
		t.Fatalf("test setup: %s or %s missing", db, bHost)
	}

	// Identity and view of the system.
	out := ts.stdout("a", `import os, pwd
print(os.getuid(), os.getgid(), os.getcwd(), pwd.getpwuid(os.getuid()).pw_name)
print(sorted(os.listdir('/workspace')), sorted(p for p in os.listdir('/proc') if p.isdigit()))
print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])`)
	t.Logf("a sees:\n%s", out)
	lines := strings.Split(out, "\n")
	if f := strings.Fields(lines[0]); len(f) != 4 || f[0] == "0" || f[2] != "/workspace" || f[3] != "sandbox" {
		t.Errorf("identity: %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], "[] ") || strings.Count(lines[1], ",") > 4 {
		t.Errorf("a's workspace should be empty and its pid namespace tiny: %q", lines[1])
	}
	if lines[2] != "0000000000000000" {
		t.Errorf("capabilities: %q", lines[2])
	}

	// Reads of what is not its own: B's workspace, the database, the config, host secrets.
	probe := `import os
def can_read(p):
    try:
        open(p, 'rb').read(1); return 'READ'
    except Exception as e:
        return type(e).__name__
def can_write(p):
    try:
        open(p, 'a').write('x'); return 'WROTE'
    except Exception as e:
        return type(e).__name__
for p in %s:
    print(p, can_read(p), can_write(p))
print('etc', sorted(x for x in os.listdir('/etc') if 'carry' in x or x in ('shadow', 'gshadow', 'sudoers')))
`
	targets := []string{bHost, db, db + "-wal", cfgFile, "/etc/shadow", "/root/.bash_history",
		"/workspace/../workspaces/b/secret.txt", "/proc/1/environ", "/usr/bin/python3", "/etc/passwd"}
	pyList := "["
	for _, p := range targets {
		pyList += fmt.Sprintf("%q, ", p)
	}
	pyList += "]"
	for _, via := range []string{"kernel", "exec"} {
		var got string
		if via == "kernel" {
			got = ts.stdout("a", fmt.Sprintf(probe, pyList))
		} else {
			_ = os.WriteFile(filepath.Join(ts.dir, "workspaces", "a", "probe.py"), []byte(fmt.Sprintf(probe, pyList)), 0o644)
			r := ts.exec("a", client.ExecRequest{Command: []string{"python3", "probe.py"}})
			got = strings.TrimSpace(r.Stdout)
			_ = os.Remove(filepath.Join(ts.dir, "workspaces", "a", "probe.py"))
		}
		t.Logf("%s probes:\n%s", via, got)
		for _, line := range strings.Split(got, "\n") {
			if strings.HasPrefix(line, "etc ") {
				if line != "etc []" {
					t.Errorf("%s: /etc holds %s", via, line)
				}
				continue
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				t.Errorf("%s: odd line %q", via, line)
				continue
			}
			switch f[0] {
			case "/usr/bin/python3", "/etc/passwd":
				if f[1] != "READ" || f[2] == "WROTE" {
					t.Errorf("%s: %s: want readable and read-only, got %s %s", via, f[0], f[1], f[2])
				}
			default:
				if f[1] == "READ" || f[2] == "WROTE" {
					t.Errorf("%s: %s must be out of reach: %s %s", via, f[0], f[1], f[2])
				}
			}
		}
	}
	if b, _ := os.ReadFile(bHost); string(b) != "b's secret" {
		t.Errorf("b's file changed: %q", b)
	}

	// Network: none without network:true (but its own loopback works); the server is reachable with it.
	netProbe := `import socket
def conn(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close(); return 'CONNECTED'
    except Exception as e:
        return type(e).__name__
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)
print(conn('127.0.0.1', %s), conn('1.1.1.1', 53), conn('127.0.0.1', srv.getsockname()[1]))`
	if got := ts.stdout("a", fmt.Sprintf(netProbe, port)); got != "ConnectionRefusedError OSError CONNECTED" {
		t.Errorf("network off: %q (want the server's port refused, the internet unreachable, its own loopback fine)", got)
	}
	r := ts.exec("a", client.ExecRequest{Command: "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", " + port + "), timeout=2)' 2>&1 | tail -1"})
	if !strings.Contains(r.Stdout, "ConnectionRefusedError") {
		t.Errorf("exec reached the server's port without network: %s", dump(r))
	}
	if got := ts.stdout("net", fmt.Sprintf(netProbe, port)); !strings.HasPrefix(got, "CONNECTED") {
		t.Errorf("network:true cannot reach the server's port: %q", got)
	}

	// B saw none of it, and A's kernel can still write its own workspace, which the server reads.
	if got := ts.stdout("b", "import os; print(sorted(os.listdir('.')))"); got != "['secret.txt']" {
		t.Errorf("b's workspace: %s", got)
	}
	ts.stdout("a", "open('mine.txt', 'w').write('a')")
	if b := ts.getFile("a", "mine.txt"); string(b) != "a" {
		t.Errorf("a's file via the API: %q", b)
	}
}

func TestSandboxFilesAPIConfinement(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.create("f", nil)
	// Symlinks made inside the sandbox that point out of the workspace.
	ts.stdout("f", `import os
os.symlink('/etc/passwd', 'passwd')
os.symlink('/', 'root')
os.symlink('../../carryover.db', 'db')
os.makedirs('sub', exist_ok=True)
open('sub/ok.txt', 'w').write('fine')
os.mkfifo('pipe')`)
	for _, p := range []string{"pipe", "passwd", "root/etc/passwd", "db", "../carryover.db", "..%2Fcarryover.db",
		"sub/../../carryover.db", "%2Fetc%2Fpasswd", "/workspace/../carryover.db"} {
		r := ts.raw("GET", "/api/sessions/f/files/"+p, "")
		if r.Status == 200 || strings.Contains(string(r.Body), "root:") || strings.Contains(string(r.Body), "SQLite") {
			t.Errorf("GET %s: %d %q", p, r.Status, r.Body)
		}
	}
	for _, p := range []string{"root/tmp/evil", "../evil", "passwd"} {
		if r := ts.raw("PUT", "/api/sessions/f/files/"+p, "evil"); r.Status == 201 && p != "passwd" {
			t.Errorf("PUT %s: %d", p, r.Status)
		}
	}
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "evil") {
		t.Fatal("/etc/passwd was written through a symlink")
	}
	if fileExists("/tmp/evil") || fileExists(filepath.Join(ts.dir, "evil")) {
		t.Error("a PUT escaped the workspace")
	}
	var e *client.Error
	if _, err := ts.c.PostFile(ts.ctx(), "f", "/etc/passwd", "x", ""); !errors.As(err, &e) || e.Status != 400 {
		t.Errorf("POST files with /etc/passwd: %v", err)
	}
	if b := ts.getFile("f", "sub/ok.txt"); string(b) != "fine" {
		t.Errorf("a plain file: %q", b)
	}
}

// TestSandboxAbuse runs each abuse in a session of its own beside a bystander session, and checks:
// a clear error, the session working afterwards with its state, the bystander untouched.
func TestSandboxAbuse(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t, func(c *configs.Config) {
		c.Sandbox.MaxProcesses = 128
		c.Run.MaxOutputBytes = 1 << 20
	})
	ts.create("bystander", nil)
	ts.stdout("bystander", "y = 'calm'")
	bystanderBox := ts.session("bystander").Sandbox.ID

	cases := []struct {
		name    string
		code    string
		memory  string
		timeout float64
		// want: "error:<ename>" (a 200 with status error), or an API error code.
		want []string
	}{
		{"memory bomb (one huge allocation)", "x = bytearray(10**11)", "256Mi", 0, []string{"error:MemoryError"}},
		{"memory bomb (growing list)", "l = []\nwhile True:\n    l.append(bytearray(10**7))", "256Mi", 0, []string{"kernel_died", "error:MemoryError"}},
		{"fork bomb", "import os\nwhile True:\n    os.fork()", "", 0, []string{"error:BlockingIOError", "kernel_died"}},
		{"infinite loop", "while True:\n    pass", "", 1, []string{"timeout"}},
		{"infinite loop ignoring SIGINT", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", "", 1, []string{"timeout"}},
		{"1 GB print", fmt.Sprintf("for _ in range(%d):\n    print('x' * 10**6)", printMB), "", 0, []string{"ok"}},
		{"kill the parent", "import os\nos.kill(os.getppid(), 9)", "", 0, []string{"error:PermissionError"}},
		{"os._exit", "import os\nos._exit(1)", "", 0, []string{"kernel_died"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts.t = t
			id := fmt.Sprintf("abuse%d", i)
			ts.create(id, &client.SandboxRequest{Memory: c.memory})
			ts.stdout(id, "state = 41")
			time.Sleep(time.Second) // the pool refills: the times below include a restore from a warm kernel
			start := time.Now()
			r, status, apiErr := ts.runT(id, c.code, c.timeout)
			took := time.Since(start)
			var got, msg string
			if apiErr != nil {
				got, msg = apiErr.Code, apiErr.Message
			}
			switch {
			case status == 200 && r.Status == "error":
				got = "error:"
				if r.Error != nil {
					got += r.Error.EName
				}
			case status == 200:
				got = r.Status
			}
			if msg == "" && r != nil && r.Error != nil && status == 200 {
				msg = r.Error.EValue
			}
			t.Logf("%s -> HTTP %d %s in %v: %.200s", c.name, status, got, took.Round(time.Millisecond), msg)
			ok := false
			for _, w := range c.want {
				ok = ok || got == w
			}
			if !ok {
				t.Errorf("got %s (HTTP %d), want one of %v: %.600s", got, status, c.want, answer(r, apiErr))
			}
			if c.name == "1 GB print" {
				// Cut in the kernel (its notice in stdout) or, if code got around the guard, by the server.
				if status == 200 && r.OutputDroppedBytes == 0 && !strings.Contains(r.Stdout, "was dropped in the kernel") {
					t.Errorf("no dropped-output notice: %.300s", answer(r, apiErr))
				}
			}
			// The session works, with its state (kept, or restored from the last checkpoint).
			if got := ts.stdout(id, "print(state + 1)"); got != "42" {
				t.Errorf("after the abuse: %q", got)
			}
			// The bystander is untouched: same sandbox, same state.
			if got := ts.stdout("bystander", "print(y)"); got != "calm" {
				t.Errorf("bystander: %q", got)
			}
			if box := ts.session("bystander").Sandbox.ID; box != bystanderBox {
				t.Errorf("bystander's sandbox changed: %s -> %s; its events: %s", bystanderBox, box,
					dump(ts.events("bystander", 0, 0, "")))
				bystanderBox = box
			}
			mustDo(t, 204, "delete "+id, func(ctx context.Context) error { return ts.c.DeleteSession(ctx, id) })
		})
	}
	ts.t = t // the subtests' contexts are done: the cleanup's calls belong to the test again
}

func TestSandboxExec(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t, func(c *configs.Config) { c.Sandbox.MaxProcesses = 64 })
	ts.create("e", nil)
	r := ts.exec("e", client.ExecRequest{Command: "id -u; pwd; echo data > made.txt; ls /proc | grep -c '^[0-9]'",
		WorkingDir: "/workspace"})
	f := strings.Fields(r.Stdout)
	if len(f) != 3 || f[0] == "0" || f[1] != "/workspace" {
		t.Errorf("exec: %s", dump(r))
	}
	if b := ts.getFile("e", "made.txt"); string(b) != "data\n" {
		t.Errorf("file made by exec: %q", b)
	}
	if got := ts.stdout("e", "print(open('made.txt').read().strip())"); got != "data" {
		t.Errorf("kernel reads exec's file: %q", got)
	}
	// A working_dir through a symlink the kernel made must not make the server create host dirs.
	outside := t.TempDir()
	ts.stdout("e", fmt.Sprintf("import os\nos.symlink(%q, 'out')", outside))
	x, err := ts.c.Exec(ts.ctx(), "e", client.ExecRequest{Command: "pwd", WorkingDir: "/workspace/out/made"})
	if err == nil || fileExists(filepath.Join(outside, "made")) {
		t.Errorf("exec working_dir through a symlink: %v %s; host dir made: %v", err, dump(x), fileExists(filepath.Join(outside, "made")))
	}
	// A fork bomb in a shell ends at the process limit or the timeout, and leaves nothing behind.
	start := time.Now()
	ctx, status := withStatus(ts.ctx())
	x, err = ts.c.Exec(ctx, "e", client.ExecRequest{Command: "f() { f | f & }; f; sleep 30", TimeoutSeconds: client.Seconds(3)})
	t.Logf("shell fork bomb -> HTTP %d in %v: %v %.200s", *status, time.Since(start).Round(time.Millisecond), err, dump(x))
	if *status != 504 && *status != 200 {
		t.Errorf("shell fork bomb: %d %v %s", *status, err, dump(x))
	}
	if got := ts.stdout("e", "print('alive')"); got != "alive" {
		t.Errorf("kernel after the shell fork bomb: %q", got)
	}
}

// TestSandboxShellEscapes runs IPython's shell escapes inside a sandboxed kernel: they go through
// pexpect, which needs a pty, so the box must have a devpts of its own. /dev/tty must stay closed:
// the box has no controlling terminal.
func TestSandboxShellEscapes(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.create("sh", nil)
	cases := []struct{ code, want string }{
		{"!echo bang-$((6*7))", "bang-42"},
		{"%%bash\necho from-bash $BASH_VERSION | cut -d' ' -f1", "from-bash"},
		{"lines = %sx echo sx-works\nprint(lines[0])", "sx-works"},
		{"%pip --version", "pip "},
		{"!cat < /dev/null; echo stdin-closed", "stdin-closed"},
		{"r = !ls /dev/pts\nprint('ptmx' in r, len(r) >= 1)", "True True"},
		{"import os\ntry:\n    os.open('/dev/tty', os.O_RDWR)\n    print('tty open')\nexcept OSError as e:\n    print('tty', e.errno)", "tty 6"},
	}
	for _, c := range cases {
		r, status, apiErr := ts.runT("sh", c.code, 60)
		if status != 200 || r.Status != "ok" || !strings.Contains(r.Stdout, c.want) || strings.Contains(r.Stdout, "out of pty") {
			t.Errorf("%q: HTTP %d, want %q in stdout: %s", c.code, status, c.want, answer(r, apiErr))
		}
	}
}

package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestSandboxEgressAllowlist runs a session with network {"allow": [...]} against servers on the
// host's loopback (nothing leaves the machine): the allowed ones are reached through the server's
// proxy (plain HTTP and an HTTPS CONNECT tunnel), everything else is refused with a clear error, and
// there is no way around the proxy.
func TestSandboxEgressAllowlist(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })
	allowed := httptest.NewServer(hello)
	defer allowed.Close()
	tlsAllowed := httptest.NewTLSServer(hello)
	defer tlsAllowed.Close()
	denied := httptest.NewServer(hello)
	defer denied.Close()
	port := func(u string) string { return u[strings.LastIndexByte(u, ':')+1:] }
	ap, tp, dp, apiPort := port(allowed.URL), port(tlsAllowed.URL), port(denied.URL), port(ts.base)

	s := ts.newSession(client.CreateRequest{SessionID: "eg", Start: true, Sandbox: &client.SandboxRequest{
		NetworkAllow: []string{"localhost:" + ap, "127.0.0.1:" + tp, "*.example.invalid"}}})
	if s.Sandbox.Network || len(s.Sandbox.NetworkAllow) != 3 {
		t.Fatalf("session's sandbox: %+v", s.Sandbox)
	}
	probe := fmt.Sprintf(`import urllib.request, urllib.error, ssl, socket, os
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=20, context=ssl._create_unverified_context()) as r:
            return 'OK ' + r.read().decode()
    except urllib.error.HTTPError as e:
        return 'HTTP %%d %%s' %% (e.code, e.read().decode().strip())
    except Exception as e:
        return 'ERR ' + str(getattr(e, 'reason', e))
def direct(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close(); return 'CONNECTED'
    except OSError as e:
        return type(e).__name__
print('proxy', os.environ.get('HTTPS_PROXY'))
print('allowed', get('http://localhost:%[1]s/a'))
print('tls', get('https://127.0.0.1:%[2]s/b'))
print('denied', get('http://localhost:%[3]s/c'))
print('tlsdenied', get('https://localhost:%[3]s/d'))
print('api', get('http://127.0.0.1:%[4]s/api/sessions'))
print('wildcard', get('http://x.example.invalid/'))
print('direct', direct('127.0.0.1', %[1]s), direct('1.1.1.1', 80))
`, ap, tp, dp, apiPort)
	check := func(via, out string) {
		t.Logf("%s:\n%s", via, out)
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, " ")
			got[k] = v
		}
		want := map[string]func(string) bool{
			"proxy":   func(v string) bool { return v == "http://127.0.0.1:3128" },
			"allowed": func(v string) bool { return v == "OK hello /a" },
			"tls":     func(v string) bool { return v == "OK hello /b" },
			"denied": func(v string) bool {
				return strings.HasPrefix(v, "HTTP 403") && strings.Contains(v, "not on this session's egress allowlist")
			},
			"tlsdenied": func(v string) bool { return strings.HasPrefix(v, "ERR") && strings.Contains(v, "403") },
			"api":       func(v string) bool { return strings.HasPrefix(v, "HTTP 403") && strings.Contains(v, "allowlist") },
			"wildcard":  func(v string) bool { return strings.HasPrefix(v, "HTTP 403") && strings.Contains(v, "cannot resolve") },
			"direct":    func(v string) bool { return v == "ConnectionRefusedError OSError" },
		}
		for k, ok := range want {
			if !ok(got[k]) {
				t.Errorf("%s: %s = %q", via, k, got[k])
			}
		}
	}
	must(t, 201, "put probe", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutFile(ctx, "eg", "egress.py", []byte(probe))
	})
	check("kernel", ts.stdout("eg", "exec(open('egress.py').read())"))
	x := ts.exec("eg", client.ExecRequest{Command: "python3 egress.py"})
	check("exec", x.Stdout)

	// The allowlist survives the kernel: a kernel killed and replaced has the same way out.
	ts.runT("eg", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 0)
	if out := ts.stdout("eg", fmt.Sprintf("import urllib.request\nprint(urllib.request.urlopen('http://localhost:%s/z').read().decode())", ap)); out != "hello /z" {
		t.Errorf("after a kernel kill: %q", out)
	}

	// Bad entries are refused at create, with the field named.
	for _, bad := range [][]string{{"http://x.com/"}, {"host:99999"}, {"*"}} {
		_, err := ts.c.CreateSession(ts.ctx(), client.CreateRequest{Sandbox: &client.SandboxRequest{NetworkAllow: bad}})
		if ae, ok := err.(*client.Error); !ok || ae.Code != "invalid_request" || !strings.Contains(ae.Message, "network.allow") {
			t.Errorf("allow %q: %v", bad, err)
		}
	}
	r := ts.raw("POST", "/api/sessions", `{"sandbox": {"network": {"deny": []}}}`)
	if r.Status != 400 {
		t.Errorf("network {deny}: %d %s", r.Status, r.Body)
	}
}

package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// TestSandboxSkills: a tenant's skills, put over the API, are importable in every session of the
// tenant at /skills, read-only unless the session asked for "rw", change at once for running
// sessions, and are never seen by another tenant.
func TestSandboxSkills(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t, func(c *configs.Config) { c.Auth.Tenants = map[string]string{"acme": "acme-token"} })
	acme := newClient(ts.base, "acme-token")
	must(t, 201, "put skill", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutSkill(ctx, "helpers.py", []byte("def greet(n):\n    return 'hi ' + n\n"))
	})
	must(t, 201, "put skill data", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutSkill(ctx, "/skills/data/table.csv", []byte("a,b\n1,2\n"))
	})
	if l := must(t, 200, "list skills", ts.c.ListSkills); len(l) != 2 || l[0].Path != "data/table.csv" || l[1].Path != "helpers.py" {
		t.Fatalf("list: %s", dump(l))
	}

	ts.create("ro", nil)
	if out := ts.stdout("ro", "import helpers\nprint(helpers.greet('ro'), open('/skills/data/table.csv').read().split()[1])"); out != "hi ro 1,2" {
		t.Errorf("read skills: %q", out)
	}
	writeProbe := "try:\n    open('/skills/made.py', 'w').write('x = 1\\n'); print('WROTE')\nexcept OSError as e:\n    print(type(e).__name__, e.errno)"
	if out := ts.stdout("ro", writeProbe); out != "OSError 30" { // EROFS
		t.Errorf("write in a read-only session: %q", out)
	}
	if x := ts.exec("ro", client.ExecRequest{Command: "echo x > /skills/y; cat /skills/helpers.py | head -1"}); x.ExitCode != 0 ||
		!strings.Contains(x.Stderr, "Read-only file system") || !strings.Contains(x.Stdout, "def greet") {
		t.Errorf("exec with read-only skills: %s", dump(x))
	}
	// A change over the API is seen by the running session.
	must(t, 201, "update skill", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutSkill(ctx, "helpers.py", []byte("def greet(n):\n    return 'hello ' + n\n"))
	})
	if out := ts.stdout("ro", "import importlib\nimportlib.reload(helpers)\nprint(helpers.greet('again'))"); out != "hello again" {
		t.Errorf("after an update: %q", out)
	}

	// A session that asked for "rw" writes them, for the whole tenant.
	s := ts.newSession(client.CreateRequest{SessionID: "rw", Start: true, Sandbox: &client.SandboxRequest{Skills: "rw"}})
	if s.Sandbox.Skills != "rw" {
		t.Errorf("session: %s", dump(s.Sandbox))
	}
	if out := ts.stdout("rw", writeProbe); out != "WROTE" {
		t.Errorf("write in an rw session: %q", out)
	}
	if b := must(t, 200, "get made.py", func(ctx context.Context) ([]byte, error) { return ts.c.GetSkill(ctx, "made.py") }); string(b) != "x = 1\n" {
		t.Errorf("made.py over the API: %q", b)
	}
	if out := ts.stdout("ro", "import made\nprint(made.x)"); out != "1" {
		t.Errorf("the other session imports what rw wrote: %q", out)
	}

	// Another tenant sees none of it, in its sessions or over the API.
	if l := must(t, 200, "acme's skills", acme.ListSkills); len(l) != 0 {
		t.Errorf("acme lists: %s", dump(l))
	}
	errCode(t, errOf(acme.GetSkill(t.Context(), "helpers.py")), 404, "not_found")
	must(t, 201, "create as acme", func(ctx context.Context) (*client.Session, error) {
		return acme.CreateSession(ctx, client.CreateRequest{SessionID: "ac", Start: true})
	})
	r, err := acme.Run(t.Context(), "ac", client.RunRequest{Code: "import os\nprint(sorted(os.listdir('/skills')))"})
	if err != nil || strings.TrimSpace(r.Stdout) != "[]" {
		t.Errorf("acme's /skills: %v %s", err, dump(r))
	}

	// Deleting is seen at once; bad paths are refused.
	mustDo(t, 204, "delete skill", func(ctx context.Context) error { return ts.c.DeleteSkill(ctx, "made.py") })
	if out := ts.stdout("ro", "import os\nprint(os.path.exists('/skills/made.py'))"); out != "False" {
		t.Errorf("after delete: %q", out)
	}
	errCode(t, errOf(ts.c.GetSkill(t.Context(), "made.py")), 404, "not_found")
	if r := ts.raw("PUT", "/api/skills/a/%2e%2e/%2e%2e/x", "x"); r.Status != 400 {
		t.Errorf("PUT with ..: %d %s", r.Status, r.Body)
	}
	if r := ts.raw("POST", "/api/sessions", `{"sandbox": {"skills": "write"}}`); r.Status != 400 {
		t.Errorf("skills mode write: %d %s", r.Status, r.Body)
	}
}

package clustertest

import (
	"strings"
	"testing"

	"github.com/carryover/carryover/internal/sandboxtest"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/kernel/sandbox"
)

// TestSkillsAcrossNodes: two sandboxed nodes share a PostgreSQL store and nothing on disk. A skill
// put on one is importable in a session of the other, and seen updated by that running session
// after another put; what an "rw" session of the second writes at /skills is read over the first's
// API; a delete on the first is gone from the second's session.
func TestSkillsAcrossNodes(t *testing.T) {
	sandboxtest.Require(t, sandbox.Probe)
	dsn := pgtest.NewDB(t)
	a := startNode(t, "a", dsn, "CARRYOVER_SANDBOX_ENABLED=true", "CARRYOVER_SANDBOX_UID_BASE=250000")
	b := startNode(t, "b", dsn, "CARRYOVER_SANDBOX_ENABLED=true", "CARRYOVER_SANDBOX_UID_BASE=251000")
	ctx := t.Context()
	if _, err := a.c.PutSkill(ctx, "helpers.py", []byte("def greet(n):\n    return 'hi ' + n\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.CreateSession(ctx, client.CreateRequest{SessionID: "sk1", Start: true,
		Sandbox: &client.SandboxRequest{Skills: "rw"}}); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(run(t, b, "sk1", "import helpers\nprint(helpers.greet('b'))").Stdout); out != "hi b" {
		t.Errorf("on b: %q", out)
	}
	if _, err := a.c.PutSkill(ctx, "helpers.py", []byte("def greet(n):\n    return 'hello ' + n\n")); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(run(t, b, "sk1", "import importlib\nimportlib.reload(helpers)\nprint(helpers.greet('b'))").Stdout); out != "hello b" {
		t.Errorf("on b after a's update: %q", out)
	}
	run(t, b, "sk1", "open('/skills/from_b.py', 'w').write('Y = 7\\n')")
	if got, err := a.c.GetSkill(ctx, "from_b.py"); err != nil || string(got) != "Y = 7\n" {
		t.Errorf("b's session's write over a's API: %q %v", got, err)
	}
	if err := a.c.DeleteSkill(ctx, "helpers.py"); err != nil {
		t.Fatal(err)
	}
	if out := strings.TrimSpace(run(t, b, "sk1", "import os\nprint(sorted(set(os.listdir('/skills')) - {'__pycache__'}))").Stdout); out != "['from_b.py']" {
		t.Errorf("on b after a's delete: %q", out)
	}
	// Python's compiled modules stay on the node: the store has what was written, nothing derived.
	if l, err := a.c.ListSkills(ctx); err != nil || len(l) != 1 || l[0].Path != "from_b.py" {
		t.Errorf("a lists: %+v %v", l, err)
	}
}

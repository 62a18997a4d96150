package server_test

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// TestSandboxSkillsInStore: skills live in the store, not the data dir. Skills put over the API and
// written by an "rw" session survive the loss of the node's skills folder (the server restarted on
// the same database with its cache gone) and are importable again; skills a previous version left in
// data_dir/skills are imported into the store once at start-up and their folder is kept.
func TestSandboxSkillsInStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// What an older version left: data_dir/skills/<hex tenant>/...
	legacy := filepath.Join(dir, "skills", hex.EncodeToString([]byte("default")), "old")
	if err := os.MkdirAll(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, "legacy.py"), []byte("WHO = 'legacy'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tweak := func(c *configs.Config) { c.Sandbox.Enabled = true; c.Sandbox.UIDBase = 240000; c.Pool.Size = 1 }
	ts := sandboxed(t, func(c *configs.Config) { c.DataDir = dir })
	if _, err := os.Stat(filepath.Join(dir, "skills.imported", hex.EncodeToString([]byte("default")), "old", "legacy.py")); err != nil {
		t.Errorf("the old folder is not kept: %v", err)
	}
	if b := must(t, 200, "get imported", func(ctx context.Context) ([]byte, error) { return ts.c.GetSkill(ctx, "old/legacy.py") }); string(b) != "WHO = 'legacy'\n" {
		t.Errorf("imported skill: %q", b)
	}
	must(t, 201, "put skill", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutSkill(ctx, "helpers.py", []byte("def greet(n):\n    return 'hi ' + n\n"))
	})
	ts.newSession(client.CreateRequest{SessionID: "w", Start: true, Sandbox: &client.SandboxRequest{Skills: "rw"}})
	if out := ts.stdout("w", "import os\nos.makedirs('/skills/pkg', exist_ok=True)\nopen('/skills/pkg/made.py', 'w').write('X = 42\\n')\nos.remove('/skills/helpers.py')\nprint('ok')"); out != "ok" {
		t.Fatalf("rw session: %q", out)
	}
	// The rw session's turn carried its writes and its delete to the store.
	if b := must(t, 200, "get made", func(ctx context.Context) ([]byte, error) { return ts.c.GetSkill(ctx, "pkg/made.py") }); string(b) != "X = 42\n" {
		t.Errorf("made.py in the store: %q", b)
	}
	errCode(t, errOf(ts.c.GetSkill(t.Context(), "helpers.py")), 404, "not_found")
	must(t, 201, "put skill again", func(ctx context.Context) (*client.FileInfo, error) {
		return ts.c.PutSkill(ctx, "helpers.py", []byte("def greet(n):\n    return 'hello ' + n\n"))
	})

	// The node loses its skills folder (and its manifest); the database stays.
	ts.stop()
	if err := os.RemoveAll(filepath.Join(dir, "skills-cache")); err != nil {
		t.Fatal(err)
	}
	ts2 := startServer(t, dir, tweak)
	ts2.create("r", nil)
	out := ts2.stdout("r", "import helpers, old.legacy, pkg.made\nprint(helpers.greet('x'), old.legacy.WHO, pkg.made.X)")
	if out != "hello x legacy 42" {
		t.Errorf("after the cache was lost: %q", out)
	}
	if l := must(t, 200, "list", ts2.c.ListSkills); len(l) != 3 {
		t.Errorf("list: %s", dump(l))
	}
	// The import ran once: the old folder is not imported again (a delete sticks).
	mustDo(t, 204, "delete imported", func(ctx context.Context) error { return ts2.c.DeleteSkill(ctx, "old/legacy.py") })
	ts2.stop()
	ts3 := startServer(t, dir, tweak)
	errCode(t, errOf(ts3.c.GetSkill(t.Context(), "old/legacy.py")), 404, "not_found")
}

package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel/sandbox"
)

// sandboxed starts a server with the sandbox on, or skips where bubblewrap cannot run.
func sandboxed(t *testing.T, tweak ...func(*configs.Config)) *testServer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	if err := sandbox.Probe(""); err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	return startServer(t, "", append([]func(*configs.Config){func(c *configs.Config) {
		c.Sandbox.Enabled = true
		c.Sandbox.UIDBase = 240000
	}}, tweak...)...)
}

func TestSandboxBasics(t *testing.T) {
	ts := sandboxed(t)
	ts.must(201, "POST", "/api/sessions", map[string]any{"session_id": "a"})
	r := ts.run("a", "import os, numpy\nopen('hello.txt', 'w').write('hi')\nprint(os.getuid(), os.getcwd(), numpy.ones(3).sum())")
	t.Logf("%s", r.Body)
	if out := r.str("stdout"); !strings.Contains(out, "/workspace 3.0") || strings.HasPrefix(out, "0 ") {
		t.Fatalf("stdout %q", out)
	}
	b, err := os.ReadFile(filepath.Join(ts.dir, "workspaces", "a", "hello.txt"))
	if err != nil || string(b) != "hi" {
		t.Fatalf("host file: %q %v", b, err)
	}
}

package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// buildWheel builds a pure-Python wheel of a one-module package named name (a Point class) with
// Debian's setuptools and wheel, offline, and returns its file name and bytes.
func buildWheel(t *testing.T, name string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	src := "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n    def __repr__(self):\n        return f'Point({self.x}, {self.y})'\n"
	for f, body := range map[string]string{
		filepath.Join(name, "__init__.py"): src,
		"setup.py":                         "from setuptools import setup\nsetup(name='" + name + "', version='1.0', packages=['" + name + "'])\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", "dist", ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build wheel: %v\n%s", err, out)
	}
	whl := name + "-1.0-py3-none-any.whl"
	b, err := os.ReadFile(filepath.Join(dir, "dist", whl))
	if err != nil {
		t.Fatal(err)
	}
	return whl, b
}

// TestSandboxPackagesPersist: pip installs (%pip, !pip and `python -m pip` in an exec command)
// land in the session's own prefix without PEP 668 in the way, are importable at once, and come
// back after a kernel kill, a rotation and in a fork, with an object of an installed class restored.
func TestSandboxPackagesPersist(t *testing.T) {
	t.Parallel()
	ts := sandboxed(t)
	ts.create("pk", nil)
	for _, name := range []string{"tinypoint", "tinyexec", "tinybang"} {
		whl, b := buildWheel(t, name)
		must(t, 201, "put wheel", func(ctx context.Context) (*client.FileInfo, error) {
			return ts.c.PutFile(ctx, "pk", "wheels/"+whl, b)
		})
	}
	r := ts.run("pk", "%pip install --no-index /workspace/wheels/tinypoint-1.0-py3-none-any.whl")
	if r.Status != "ok" || !strings.Contains(r.Stdout, "Successfully installed tinypoint-1.0") {
		t.Fatalf("%%pip install: %s", dump(r))
	}
	r = ts.run("pk", "!pip install --no-index wheels/tinybang-1.0-py3-none-any.whl")
	if r.Status != "ok" || !strings.Contains(r.Stdout, "Successfully installed tinybang-1.0") {
		t.Fatalf("!pip install: %s", dump(r))
	}
	x := ts.exec("pk", client.ExecRequest{Command: "python3 -m pip install --no-index wheels/tinyexec-1.0-py3-none-any.whl"})
	if x.ExitCode != 0 || strings.Contains(x.Stderr, "externally-managed") {
		t.Fatalf("python -m pip install in exec: %s", dump(x))
	}
	out := ts.stdout("pk", "import tinypoint, tinyexec, tinybang\np = tinypoint.Point(1, 2)\nprint(p, tinypoint.__file__.startswith('/workspace/.packages/'))")
	if out != "Point(1, 2) True" {
		t.Fatalf("import after install: %q", out)
	}
	hostSite, _ := filepath.Glob(filepath.Join(ts.dir, "workspaces", "pk", ".packages", "*", "lib", "*", "*-packages", "tinypoint"))
	if len(hostSite) != 1 {
		t.Errorf("tinypoint not in the session's workspace prefix: %v", hostSite)
	}

	// Kernel killed: the replacement finds the packages and unpickles p.
	ts.runT("pk", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", 0)
	if out := ts.stdout("pk", "print(p, type(p).__module__, tinyexec.Point(3, 4))"); out != "Point(1, 2) tinypoint Point(3, 4)" {
		t.Errorf("after a kernel kill: %q", out)
	}
	// Rotation: a new sandbox from the pool.
	before := ts.session("pk").Sandbox.ID
	if s := ts.act(ts.c.Rotate, "pk"); s.Sandbox.ID == before {
		t.Fatalf("not rotated: %s", dump(s))
	}
	if out := ts.stdout("pk", "import tinybang\nprint(p, tinybang.Point(5, 6))"); out != "Point(1, 2) Point(5, 6)" {
		t.Errorf("after a rotation: %q", out)
	}
	// Hibernation and a server restart bring the workspace back from the store.
	ts.act(ts.c.Hibernate, "pk")
	if out := ts.stdout("pk", "print(p, tinyexec.Point(7, 8))"); out != "Point(1, 2) Point(7, 8)" {
		t.Errorf("after hibernation: %q", out)
	}
	// A fork carries them.
	ts.fork("pk", client.ForkRequest{SessionID: "pk2"})
	if out := ts.stdout("pk2", "print(p, __import__('tinypoint').Point(0, 0))"); out != "Point(1, 2) Point(0, 0)" {
		t.Errorf("in a fork: %q", out)
	}
}

package persistence

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentPython runs the agent's own Python tests (make test only runs go test), one process per
// module, in parallel: run as one, the modules took 200 s back to back, the longest stretch of this
// package. Their kernels are children of a zygote per module process (agent/zygote.py), so a module
// pays the interpreter and IPython's import once, not once per kernel. test_fidelity and
// test_libstate had run one process per test while each of their kernels was a fresh interpreter;
// with the zygote, one process per module costs less CPU (test_fidelity 20 s against 28 s split) and
// no module takes longer than test_replay (26 s).
func TestAgentPython(t *testing.T) {
	t.Parallel()
	mods, err := filepath.Glob("agent/test_*.py")
	if err != nil || len(mods) == 0 {
		t.Fatalf("no agent tests found: %v", err)
	}
	for _, m := range mods {
		m := filepath.Base(m)
		t.Run(strings.TrimSuffix(m, ".py"), func(t *testing.T) {
			t.Parallel()
			runUnittest(t, "discover", "-s", ".", "-p", m)
		})
	}
}

// runUnittest runs /usr/bin/python3 -m unittest args in agent/ and fails t on a failure.
func runUnittest(t *testing.T, args ...string) {
	cmd := exec.Command("/usr/bin/python3", append([]string{"-m", "unittest"}, args...)...)
	cmd.Dir = "agent"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent tests failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestAgentBootstrapQuotes checks the embedded sources survive quoting as Python literals.
func TestAgentBootstrapQuotes(t *testing.T) {
	code := AgentBootstrap("/tmp/spool'\"x")
	if !strings.Contains(code, "del __carryover_boot") || len(code) < len(AgentSource())-200*len(agentModules) {
		t.Fatalf("bootstrap looks wrong: %.200s", code)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", "import ast,sys; ast.parse(sys.stdin.read())")
	cmd.Stdin = strings.NewReader(code)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bootstrap does not parse: %v\n%s", err, out)
	}
}

// TestAgentBootstrapLoadsPackageFromStrings runs the bootstrap in a Python process whose working
// directory and sys.path hold no copy of the agent (as in the sandbox, where the server's files are
// not mounted): every module of the package must come from the strings the bootstrap carries, the
// agent must answer, tracebacks must show its source, and a second bootstrap must replace it cleanly.
func TestAgentBootstrapLoadsPackageFromStrings(t *testing.T) {
	spool := t.TempDir()
	boot := AgentBootstrap(spool)
	script := `import json, sys, traceback
from IPython.core.interactiveshell import InteractiveShell
sh = InteractiveShell.instance()
boot = sys.stdin.read()
exec(boot, sh.user_ns)
first = sh.user_ns["__carryover__"]
exec(boot, sh.user_ns)
ag = sh.user_ns["__carryover__"]
assert ag is not first and "__carryover_boot" not in sh.user_ns
mods = sorted(k for k in sys.modules if k == "carryover_agent" or k.startswith("carryover_agent."))
files = [getattr(sys.modules[k], "__file__", None) for k in mods]
ag.call("ping", "{}")
ping = json.loads(ag.take())
sh.run_cell("x = 41")
ag.call("snapshot", json.dumps({"token": "t1"}))
snap = json.loads(ag.take())
try:
    ag.call("no_such_op", "{}")
except AttributeError:
    tb = traceback.format_exc()
print(json.dumps({"mods": mods, "files": files, "ping": ping, "saved": snap["saved"], "tb": tb,
                  "finders": sum(1 for f in sys.meta_path if getattr(f, "carryover_agent", False))}))
`
	cmd := exec.Command("/usr/bin/python3", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PYTHONPATH=")
	cmd.Stdin = strings.NewReader(boot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bootstrap failed: %v\n%s", err, out)
	}
	s := string(out)
	for _, m := range agentModules {
		if !strings.Contains(s, `"`+m.name+`"`) {
			t.Errorf("module %s not loaded: %s", m.name, s)
		}
	}
	for _, want := range []string{`"files": [null`, `"ok": true`, `"saved": ["x"]`, `"finders": 1`,
		`carryover_agent/agent.py`, `getattr(self, \"op_\" + op)`} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %s:\n%s", want, s)
		}
	}
}

// TestAgentModulesListed: docs/persistence.md's "The agent package" is the one list of the agent's
// modules; every module of the package must be named there (as `name`), and nothing else.
func TestAgentModulesListed(t *testing.T) {
	b, err := os.ReadFile("../docs/persistence.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## The agent package")
	if i < 0 {
		t.Fatal("docs/persistence.md has no section The agent package")
	}
	sec := doc[i:]
	if j := strings.Index(sec, "\nThe package docstring"); j > 0 {
		sec = sec[:j]
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "- `") {
			continue
		}
		head, _, _ := strings.Cut(line, ":")
		for k, part := range strings.Split(head, "`") {
			if k%2 == 1 { // inside backticks
				listed[part] = true
			}
		}
	}
	for _, m := range agentModules[1:] {
		stem := strings.TrimPrefix(m.name, agentPackage+".")
		if !listed[stem] {
			t.Errorf("module %s is not in docs/persistence.md's list of the agent's modules", stem)
		}
		delete(listed, stem)
	}
	for name := range listed {
		t.Errorf("docs/persistence.md lists %s, which is no module of the agent", name)
	}
}

// TestAgentPreloadInstallsTheTemplatesModules: a kernel forked from a template that ran
// AgentPreload installs the modules it inherited (not compiled again) on Install's short
// expression, which is True; on modules preloaded from other sources (a digest not this build's) it
// is False and changes nothing, and the bootstrap's expression loads the modules from its strings.
// A second install (the agent re-installs) takes the bootstrap too.
func TestAgentPreloadInstallsTheTemplatesModules(t *testing.T) {
	spool := t.TempDir()
	script := `import json, sys
from IPython.core.interactiveshell import InteractiveShell
preload, quick, expr, stale = json.loads(sys.stdin.read())
exec(compile(preload, "carryover_preload.py", "exec"), {"__name__": "carryover_preload"})
pre = sys.modules["carryover_agent"]
pre_snapshot = sys.modules["carryover_agent.snapshot"]
if stale:
    pre.__carryover_preloaded__ = "another build"
sh = InteractiveShell.instance()
took = eval(quick, sh.user_ns)
if not took:
    assert "__carryover__" not in sh.user_ns
    eval(expr, sh.user_ns)
ag = sh.user_ns["__carryover__"]
reused = sys.modules["carryover_agent"] is pre and sys.modules["carryover_agent.snapshot"] is pre_snapshot
ag.call("ping", "{}")
ping = json.loads(ag.take())
sh.run_cell("x = 41")
ag.call("snapshot", json.dumps({"token": "t1"}))
saved = json.loads(ag.take())["saved"]
again = eval(quick, sh.user_ns)
eval(expr, sh.user_ns)
again = again or sys.modules["carryover_agent"] is pre
leaked = [k for k in sh.user_ns if k.startswith("__carryover_") and k != "__carryover__"]
print(json.dumps({"took": took, "reused": reused, "ping": ping["ok"], "saved": saved, "again": again, "leaked": leaked,
                  "finders": sum(1 for f in sys.meta_path if getattr(f, "carryover_agent", False))}))
`
	for _, stale := range []bool{false, true} {
		in, _ := json.Marshal([]any{AgentPreload(), agentPreloadedExpr(spool, spool), agentBootExpr(spool, spool), stale})
		cmd := exec.Command("/usr/bin/python3", "-c", script)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PYTHONPATH=")
		cmd.Stdin = strings.NewReader(string(in))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("stale=%v: %v\n%s", stale, err, out)
		}
		var got struct {
			Took, Reused, Ping, Again bool
			Saved, Leaked             []string
			Finders                   int
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
			t.Fatalf("stale=%v: %v\n%s", stale, err, out)
		}
		if got.Took == stale || got.Reused == stale || !got.Ping || len(got.Saved) != 1 || got.Saved[0] != "x" || got.Again ||
			len(got.Leaked) != 0 || got.Finders != 1 {
			t.Errorf("stale=%v: short expression %v, reused %v (want %v), ping %v, saved %v, reloaded by a second bootstrap %v, "+
				"helpers left %v, finders %d:\n%s", stale, got.Took, got.Reused, !stale, got.Ping, got.Saved, !got.Again,
				got.Leaked, got.Finders, out)
		}
	}
}

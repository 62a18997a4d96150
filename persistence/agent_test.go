package persistence

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAgentPython runs the agent's own Python tests (make test only runs go test).
func TestAgentPython(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	cmd := exec.Command("/usr/bin/python3", "-m", "unittest", "discover", "-s", "agent", "-p", "test_*.py")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent tests failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestAgentBootstrapQuotes checks the embedded source survives quoting as a Python literal.
func TestAgentBootstrapQuotes(t *testing.T) {
	code := AgentBootstrap("/tmp/spool'\"x")
	if !strings.Contains(code, "del __carryover_boot") || len(code) < len(agentSource) {
		t.Fatalf("bootstrap looks wrong: %.200s", code)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", "import ast,sys; ast.parse(sys.stdin.read())")
	cmd.Stdin = strings.NewReader(code)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bootstrap does not parse: %v\n%s", err, out)
	}
}

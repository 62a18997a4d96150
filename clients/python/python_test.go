// Package python_test runs the Python SDK's unittest suite (clients/python/tests) under go test,
// so `make test` covers it: the server binary (servertest.Binary) is handed to the Python tests
// through CARRYOVER_TEST_BIN (or taken from it when already set); they start it themselves.
package python_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/servertest"
)

const python = "/usr/bin/python3"

func TestPythonSDK(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is needed (make deps installs Debian's python3 with the kernel packages): %v", python, err)
	}
	// The suite's streaming tests skip without websocket-client (the SDK works without it, except for
	// streaming); here, where make deps installs it, they must run.
	if out, err := exec.Command(python, "-c", "import websocket").CombinedOutput(); err != nil {
		t.Fatalf("python3-websocket is needed for the streaming tests (make deps installs it): %v\n%s", err, out)
	}
	if testing.Short() {
		t.Skip("the Python SDK suite starts a server and kernels: -short skips it, make test runs it")
	}
	bin := servertest.MustBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = append(os.Environ(), "PYTHONPATH=src", "CARRYOVER_TEST_BIN="+bin,
		"PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest discover -s clients/python/tests -v:\n%s", out)
	if err != nil {
		t.Fatalf("the Python SDK tests failed: %v", err)
	}
}

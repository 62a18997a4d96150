// Package js_test runs the Node client's tests (clients/js/test/, node's test runner) against a
// real server, so that `go test ./...` and `make test` cover the Node client too.
package js_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/servertest"
)

// TestNodeClient builds cmd/carryover, serves it on a free loopback port without the sandbox and
// with a pool of one kernel, and runs `node --test test/` with CARRYOVER_URL and CARRYOVER_TOKEN:
// the StateSet coding-agent example, runs across turns, Python and API errors, streaming, files,
// fork and checkpoints.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed for the Node client's tests (every machine of this project has it): %v", err)
	}
	jsDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.StartProcess(t, servertest.Options{Token: "t", Flags: []string{"--pool.size", "1"}, Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
	base, token := srv.Base, srv.Token

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "test/")
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(), "CARRYOVER_URL="+base, "CARRYOVER_TOKEN="+token)
	if !hasGlobalWebSocket(node) {
		// Node 20 and 21 have the global WebSocket behind this flag (Node 22 on: always).
		cmd.Env = append(cmd.Env, "NODE_OPTIONS="+strings.TrimSpace(os.Getenv("NODE_OPTIONS")+" --experimental-websocket"))
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	if err != nil {
		t.Fatalf("node --test test/: %v\n%s", err, out.String())
	}
	t.Logf("node --test test/:\n%s", out.String())
}

// hasGlobalWebSocket says whether node has the WebSocket global without flags.
func hasGlobalWebSocket(node string) bool {
	out, err := exec.Command(node, "-e", "process.stdout.write(typeof WebSocket)").Output()
	return err == nil && string(out) == "function"
}

package js_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/carryover/carryover/internal/servertest"
)

// TestNodeClientRidesOutKill9 drives turns through the Node client (testdata/restart_driver.mjs:
// POST runs and websocket runs in turn) while the server is killed with -9 and restarted twice,
// once while a cell runs (turn 3, a websocket run: the client reconnects, sends the run frame again
// with its key, and gets run_interrupted instead of a second run) and once between turns; see
// servertest.DriveThroughKills. The list each turn appends to must end as 0..n-1.
func TestNodeClientRidesOutKill9(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed: %v", err)
	}
	argv := []string{node}
	if !hasGlobalWebSocket(node) {
		argv = append(argv, "--experimental-websocket") // Node 20 and 21
	}
	p := servertest.StartProcess(t, servertest.Options{Token: "t", Flags: []string{"--pool.size", "1"},
		Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
	servertest.DriveThroughKills(t, p, servertest.ID(t), 8, 3, 5, append(argv, filepath.Join("testdata", "restart_driver.mjs"))...)
}

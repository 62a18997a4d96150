package python_test

import (
	"path/filepath"
	"testing"

	"github.com/carryover/carryover/internal/servertest"
)

// TestPythonSDKRidesOutKill9 drives turns through the Python SDK (testdata/restart_driver.py)
// while the server is killed with -9 and restarted twice: once while a cell runs (the SDK's retry
// finds the dead attempt's key and gets run_interrupted, never a second run; the driver looks at
// the list and runs the turn again only if its effects were lost with the kernel), once between
// turns (the next run's connection is refused until the restart, and the retry goes through). The
// list each turn appends to must end as 0..n-1: no turn lost, none run twice.
func TestPythonSDKRidesOutKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kill -9 of a real server under the SDK (~20 s): -short skips it, make test runs it")
	}
	p := servertest.StartProcess(t, servertest.Options{Token: "t", Flags: []string{"--pool.size", "1"},
		Env: []string{"CARRYOVER_SANDBOX_ENABLED=false"}})
	id := servertest.ID(t)
	const n, slow, between = 8, 3, 5
	servertest.DriveThroughKills(t, p, id, n, slow, between, python, filepath.Join("testdata", "restart_driver.py"))
}

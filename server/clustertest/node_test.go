package clustertest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/internal/servertest"
)

// testTTL is the nodes' heartbeat TTL in these tests (short, so a dead node's sessions move soon).
const testTTL = 3 * time.Second

const testToken = "cluster-test-token"

// TestMain runs the tests with the package's PostgreSQL and S3 servers.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	s3test.Main()
	os.Exit(code)
}

// node is a carryover node of the test: the real binary, started through internal/servertest as
// every test's server is, on the cluster's PostgreSQL with its own data dir.
type node struct {
	t       *testing.T
	name    string
	dataDir string
	base    string
	c       *client.Client
	p       *servertest.Process
}

// nodeEnv is the configuration every node of these tests runs with, before a test's own.
func nodeEnv(name, dsn string) []string {
	// pool.max_size as configured (servertest's own default is 0): the nodes' pools grow under a
	// burst of claims, as they did when the nodes read only these variables.
	return []string{"CARRYOVER_POOL_SIZE=0", "CARRYOVER_POOL_MAX_SIZE=8", "CARRYOVER_SANDBOX_ENABLED=false",
		"CARRYOVER_STORE_DRIVER=postgres", "CARRYOVER_STORE_DSN=" + dsn,
		"CARRYOVER_CLUSTER_NODE_ID=" + name, "CARRYOVER_CLUSTER_HEARTBEAT_SECONDS=0.3",
		"CARRYOVER_CLUSTER_TTL_SECONDS=" + fmt.Sprint(testTTL.Seconds())}
}

// startNode starts a node on dsn with its own data dir (nothing on local disk is shared) and extra
// CARRYOVER_* settings, and waits until it answers /healthz.
func startNode(t *testing.T, name, dsn string, env ...string) *node {
	t.Helper()
	n, err := launchNode(t, name, dsn, env...)
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	return n
}

// launchNode starts a node as startNode does, answering the error of one that exited (or never
// answered /healthz) instead of failing the test; its log is in the node then.
func launchNode(t *testing.T, name, dsn string, env ...string) (*node, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A node drains its turns at SIGTERM (the serve command's 2 minutes at most): term waits 60 s.
	// Its server code runs under the race detector when this test binary does, as when a node was it.
	p, err := servertest.Launch(servertest.Options{Token: testToken, Env: append(nodeEnv(name, dsn), env...), Dir: dir,
		StopGrace: 60 * time.Second, Race: raceEnabled})
	if p == nil {
		t.Fatal(err)
	}
	n := &node{t: t, name: name, dataDir: filepath.Join(dir, "data"), base: p.Base, c: client.New(p.Base, testToken), p: p}
	t.Cleanup(func() {
		n.term()
		killKernels(n.dataDir)
		if t.Failed() {
			t.Logf("node %s log:\n%s", n.name, n.p.Log())
		}
	})
	return n, err
}

// log is what the node printed so far (all its runs).
func (n *node) log() string { return n.p.Log() }

// kill ends the node with SIGKILL, as a crash: no shutdown, no checkpoint, no release.
func (n *node) kill() { n.p.Kill9() }

// term asks the node to stop (SIGTERM) and waits for it (Stop: the process group is killed after
// 60 s).
func (n *node) term() { n.p.Stop() }

// restart starts the node's process again (after term or kill), with its address, data dir and
// settings: what a supervisor does, or a rolling upgrade that restarts each node in turn.
func (n *node) restart() { n.p.Restart(n.t) }

// killKernels SIGKILLs every process whose command line names dir: the kernels a killed node left
// behind (each leads its own process group, so the node's death does not reach them).
func killKernels(dir string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// pause and resume stop and continue the node process (SIGSTOP/SIGCONT): its kernels run on.
// pause returns once every thread of the node is stopped: SIGSTOP takes effect when the thread it
// was given to next runs, and on a loaded machine the others served on meanwhile (a run forwarded
// 20 ms after kill returned was taken by the "paused" node: TestSplitBrain's retry then rightly
// answered run_interrupted).
func (n *node) pause() {
	n.t.Helper()
	n.p.Signal(syscall.SIGSTOP)
	eventually(n.t, 10*time.Second, "node "+n.name+" stopped", func() bool { return stopped(n.p.PID()) })
}

func (n *node) resume() { n.p.Signal(syscall.SIGCONT) }

// stopped reports whether every thread of process pid is stopped (state T in its stat).
func stopped(pid int) bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		rest := string(b[bytes.LastIndexByte(b, ')')+1:]) // the command name may hold spaces
		if f := strings.Fields(rest); len(f) == 0 || f[0] != "T" {
			return false
		}
	}
	return len(stats) > 0
}

// alive reports whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// eventually polls cond every 50 ms for up to d and fails with what if it never held.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

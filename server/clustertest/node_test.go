package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/internal/servertest"
	"github.com/carryover/carryover/server"
)

// testTTL is the nodes' heartbeat TTL in these tests (short, so a dead node's sessions move soon).
const testTTL = 3 * time.Second

const (
	testToken = "cluster-test-token"
	nodeEnv   = "CARRYOVER_CLUSTERTEST_NODE" // set: this process is a node, not the test runner
)

// TestMain runs the tests, or, re-executed with nodeEnv set, one carryover node.
func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) == "1" {
		os.Exit(runNode())
	}
	code := pgtest.Main(m)
	s3test.Main()
	os.Exit(code)
}

// runNode is a node's main: the config from CARRYOVER_* variables, server.New, serve until SIGTERM.
func runNode() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := configs.Load("", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 2
	}
	srv, err := server.New(context.Background(), cfg, nil, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server.New:", err)
		return 1
	}
	if err := srv.Listen(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := srv.Run(ctx, 30*time.Second); err != nil { // as the serve command does
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// node is a carryover node process of the test.
type node struct {
	t       *testing.T
	name    string
	dataDir string
	base    string
	c       *client.Client
	cmd     *exec.Cmd
	exited  chan struct{}
	log     servertest.SyncBuffer
}

// startNode starts a node on dsn with its own data dir (nothing on local disk is shared) and extra
// CARRYOVER_* settings, and waits until it answers /healthz.
func startNode(t *testing.T, name, dsn string, env ...string) *node {
	t.Helper()
	n := launchNode(t, name, dsn, env...)
	n.waitHealthy()
	return n
}

// launchNode starts a node as startNode does, without waiting for it.
func launchNode(t *testing.T, name, dsn string, env ...string) *node {
	t.Helper()
	addr := servertest.FreeAddr(t)
	n := &node{t: t, name: name, dataDir: filepath.Join(t.TempDir(), name), base: "http://" + addr, exited: make(chan struct{})}
	n.c = client.New(n.base, testToken)
	n.cmd = exec.Command(os.Args[0], "-test.run=^$")
	n.cmd.Env = append(os.Environ(), nodeEnv+"=1",
		"CARRYOVER_SERVER_ADDR="+addr, "CARRYOVER_DATA_DIR="+n.dataDir, "CARRYOVER_AUTH_TOKEN="+testToken,
		"CARRYOVER_POOL_SIZE=0", "CARRYOVER_SANDBOX_ENABLED=false",
		"CARRYOVER_STORE_DRIVER=postgres", "CARRYOVER_STORE_DSN="+dsn,
		"CARRYOVER_CLUSTER_NODE_ID="+name, "CARRYOVER_CLUSTER_HEARTBEAT_SECONDS=0.3",
		"CARRYOVER_CLUSTER_TTL_SECONDS="+fmt.Sprint(testTTL.Seconds()))
	n.cmd.Env = append(n.cmd.Env, env...)
	n.cmd.Stdout, n.cmd.Stderr = &n.log, &n.log
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		n.term()
		killKernels(n.dataDir)
		if t.Failed() {
			t.Logf("node %s log:\n%s", n.name, n.log.String())
		}
	})
	return n
}

func (n *node) waitHealthy() {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := n.c.Health(n.t.Context()); err == nil {
			return
		}
		select {
		case <-n.exited:
			n.t.Fatalf("node %s exited before it was healthy:\n%s", n.name, n.log.String())
		default:
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("node %s not healthy after 60 s:\n%s", n.name, n.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the node with SIGKILL, as a crash: no shutdown, no checkpoint, no release.
func (n *node) kill() {
	n.cmd.Process.Kill()
	<-n.exited
}

// term asks the node to stop (SIGTERM) and waits for it.
func (n *node) term() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		n.cmd.Process.Kill()
		<-n.exited
	}
}

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
	n.cmd.Process.Signal(syscall.SIGSTOP)
	eventually(n.t, 10*time.Second, "node "+n.name+" stopped", func() bool { return stopped(n.cmd.Process.Pid) })
}

func (n *node) resume() { n.cmd.Process.Signal(syscall.SIGCONT) }

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

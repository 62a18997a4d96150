package clustertest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/internal/servertest"
	"github.com/carryover/carryover/persistence/format"
)

// rollingFullEnv runs TestRollingUpgrade at the size: 20 sessions (10 from each client
// library) and more rounds between restarts. make test runs it smaller (6 sessions).
const rollingFullEnv = "CARRYOVER_TEST_ROLLING_FULL"

// loadDriver is one client library's load (testdata/load_driver.* of clients/python and
// clients/js) running as a process, its progress read from its output.
type loadDriver struct {
	name   string
	cmd    *exec.Cmd
	round  atomic.Int64 // rounds completed
	mu     sync.Mutex
	fails  []string
	finals map[string]string // session -> its final {"L", "v"} JSON
	lines  []string
	done   chan struct{} // closed once the process exited; exit is its error then
	exit   error
}

// startLoad starts a driver (argv: interpreter [flags] script) on base with sessions prefix-0..n-1.
func startLoad(t *testing.T, ctx context.Context, name, base, prefix string, n int, stop string, argv ...string) *loadDriver {
	t.Helper()
	d := &loadDriver{name: name, finals: map[string]string{}, done: make(chan struct{})}
	args := append(argv[1:], base, testToken, prefix, fmt.Sprint(n), stop)
	d.cmd = exec.CommandContext(ctx, argv[0], args...)
	d.cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	d.cmd.Stderr = &stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.round.Store(-1)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.lines = append(d.lines, line)
			switch f := strings.SplitN(line, " ", 3); f[0] {
			case "round":
				var r int64
				fmt.Sscan(f[1], &r)
				d.round.Store(r)
			case "fail":
				d.fails = append(d.fails, line)
			case "final":
				if len(f) == 3 {
					d.finals[f[1]] = f[2]
				}
			}
			d.mu.Unlock()
		}
		err := d.cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%s driver: %v\n%s", name, err, stderr.String())
		}
		d.exit = err
		close(d.done)
	}()
	return d
}

// waitRounds waits until every driver completed round r. A driver that exits first fails the
// test at once with its error, and one that is late says where it stands in the failure's first
// line: CI shows a long log cut, and a failure that said only "not within 5m" named neither.
func waitRounds(t *testing.T, r int64, nodes []*node, ds ...*loadDriver) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		behind := 0
		for _, d := range ds {
			select {
			case <-d.done:
				t.Fatalf("waiting for round %d: %s exited: %v (round %d, last lines %q)", r, d.name, d.exit, d.round.Load(), d.tail(5))
			default:
			}
			if d.round.Load() < r {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, d := range ds {
				if d.round.Load() < r {
					t.Errorf("%s driver at round %d, its last lines %q", d.name, d.round.Load(), d.tail(5))
				}
			}
			for _, n := range nodes {
				t.Errorf("node %s, goroutines waiting a minute or more: %s", n.name, strings.Join(stuckGoroutines(n), "; "))
			}
			t.Fatalf("round %d of the load: not within 5m", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stuckGoroutines ends the node with SIGQUIT, which makes Go print every goroutine's stack into its
// log (printed whole when the test fails), and answers those waiting a minute or more, by state and
// function, with their counts: a stalled load's first lines then say where a node waits.
func stuckGoroutines(n *node) []string {
	n.p.Signal(syscall.SIGQUIT)
	select {
	case <-n.p.Exited():
	case <-time.After(20 * time.Second):
		return []string{"(no stacks: the node did not exit at SIGQUIT)"}
	}
	counts := map[string]int{}
	lines := strings.Split(n.log(), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "goroutine ") || !strings.Contains(l, " minutes") || i+1 >= len(lines) {
			continue
		}
		head := l[strings.Index(l, "[")+1:]
		state, _, _ := strings.Cut(strings.TrimSuffix(head, "]:"), ",")
		counts[state+" in "+stackCaller(lines[i+1:])]++
	}
	var out []string
	for k, c := range counts {
		out = append(out, fmt.Sprintf("%d x %s", c, k))
	}
	slices.Sort(out)
	return out
}

// stackCaller is the first function of a goroutine's stack (function and file lines alternate,
// a blank line ends it) outside the runtime, sync and internal packages: where it waits.
func stackCaller(stack []string) string {
	first := ""
	for j := 0; j < len(stack) && stack[j] != ""; j += 2 {
		fn := stack[j]
		if k := strings.LastIndex(fn, "("); k > 0 {
			fn = fn[:k]
		}
		if first == "" {
			first = fn
		}
		if !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "sync.") && !strings.HasPrefix(fn, "internal/") {
			return fn
		}
	}
	return first
}

// tail is the driver's last n lines of output.
func (d *loadDriver) tail(n int) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.lines[max(0, len(d.lines)-n):])
}

// TestRollingUpgrade: a 2-node cluster on PostgreSQL + S3 under load from the Python SDK and the
// Node client (sessions in a loop of turns, each appending the round's number to a list); each
// node is stopped (SIGTERM: it drains) and started again as the next build, one at a time: this
// binary reading one checkpoint format more (cluster.test_max_format, as in
// TestRollingUpgradeSwitchesFormat). The clients have no retry code of their own: zero failed
// turns, zero turns run twice or lost (every list is 0..R-1), and every session's variable intact;
// once both nodes are new the cluster switches to the new format and the turns after it are
// checkpointed in it.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster under load from two client libraries (~40 s): -short skips it, make test runs it")
	}
	perClient, between := 3, int64(2)
	if os.Getenv(rollingFullEnv) != "" {
		perClient, between = 10, 4
	}
	root, err := servertest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed: %v", err)
	}
	nodeArgv := []string{nodeBin}
	if out, err := exec.Command(nodeBin, "-e", "process.stdout.write(typeof WebSocket)").Output(); err != nil || string(out) != "function" {
		nodeArgv = append(nodeArgv, "--experimental-websocket")
	}
	gw := s3test.Shared(t)
	dsn, bucket := pgtest.NewDB(t), s3test.NewBucket()
	// A restarted node's sessions all start kernels at once (restored from their checkpoints) on
	// this shared 2-core machine: give them the time, the subject here is the clients' ride.
	env := append(s3Env(gw.Endpoint, bucket), "CARRYOVER_KERNEL_STARTUP_TIMEOUT_SECONDS=180")
	a := startNode(t, "a", dsn, env...)
	b := startNode(t, "b", dsn, env...)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	stop := filepath.Join(t.TempDir(), "stop")
	py := startLoad(t, ctx, "python", a.base, "py", perClient, stop,
		"/usr/bin/python3", filepath.Join(root, "clients", "python", "testdata", "load_driver.py"))
	js := startLoad(t, ctx, "node", b.base, "js", perClient, stop,
		append(nodeArgv, filepath.Join(root, "clients", "js", "testdata", "load_driver.mjs"))...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, d := range []*loadDriver{py, js} {
				d.mu.Lock()
				t.Logf("%s driver output:\n%s", d.name, strings.Join(d.lines, "\n"))
				d.mu.Unlock()
			}
		}
	})

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	oldF, newF := format.Newest, format.Newest+1
	r := between
	waitRounds(t, r, []*node{a, b}, py, js)
	for _, n := range []*node{a, b} {
		n.term()
		n.p.AddEnv("CARRYOVER_CLUSTER_TEST_MAX_FORMAT=" + strconv.Itoa(newF)) // the next build
		n.restart()
		if n == a {
			if f := storeFormat(t, db); f != oldF {
				t.Fatalf("the store switched to format %d while node b (format %d) lives", f, oldF)
			}
		}
		r = max(py.round.Load(), js.round.Load()) + between
		waitRounds(t, r, []*node{a, b}, py, js)
	}
	// Node b's old row expires after the TTL; the next heartbeat switches. Turns after it are
	// checkpointed in the new format.
	eventually(t, 4*testTTL, "the switch to format "+strconv.Itoa(newF), func() bool { return storeFormat(t, db) == newF })
	r = max(py.round.Load(), js.round.Load()) + between
	waitRounds(t, r, []*node{a, b}, py, js)
	for _, id := range []string{"py-0", "js-0"} {
		if v := latestFormat(t, db, id); v != newF {
			t.Errorf("%s's last checkpoint after the switch is format %d, want %d", id, v, newF)
		}
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*loadDriver{py, js} {
		<-d.done
		if d.exit != nil {
			t.Fatal(d.exit)
		}
		d.mu.Lock()
		checkLoad(t, d, perClient)
		t.Logf("%s: %d rounds over %d sessions through two node restarts, %d failed turns", d.name, d.round.Load()+1, perClient, len(d.fails))
		d.mu.Unlock()
	}
}

// checkLoad: no failed turn, and every session's list is 0..R-1 with its variable intact.
func checkLoad(t *testing.T, d *loadDriver, n int) {
	t.Helper()
	if len(d.fails) > 0 {
		t.Errorf("%s: %d failed turns:\n%s", d.name, len(d.fails), strings.Join(d.fails, "\n"))
	}
	if len(d.finals) != n {
		t.Fatalf("%s: %d sessions reported, want %d", d.name, len(d.finals), n)
	}
	for sid, js := range d.finals {
		var got struct {
			L []int  `json:"L"`
			V string `json:"v"`
		}
		if err := json.Unmarshal([]byte(js), &got); err != nil {
			t.Fatalf("%s %s: %q: %v", d.name, sid, js, err)
		}
		want := make([]int, len(got.L))
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(got.L, want) || len(got.L) < 3 {
			t.Errorf("%s %s: list %v: a turn lost or run twice", d.name, sid, got.L)
		}
		if got.V != "kept-"+sid {
			t.Errorf("%s %s: variable v = %q, want %q", d.name, sid, got.V, "kept-"+sid)
		}
	}
}

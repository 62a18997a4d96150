package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/faultproxy"
	"github.com/carryover/carryover/internal/sandboxtest"
	"github.com/carryover/carryover/internal/servertest"
)

// The chaos harness: one real server (the binary, SQLite, the sandbox on where it can run) and
// sessions driven by the Go client through a fault proxy, with faults injected at random moments
// of a turn from a seed. A model of each session (the last answered turn, and whether a turn was
// left unanswered) checks every session after each recovery: its state must be the last answered
// turn's, or differ only as the product said (a retry answered run_interrupted, or the restore
// report named the file in files_ahead). CARRYOVER_CHAOS_FAULTS sets the number of faults
// (make test: 6; make chaos: more), CARRYOVER_CHAOS_SEED the seed.

// faultKinds are the faults the harness injects, each with its own recovery.
var faultKinds = []string{"kill9-server", "sigstop-server", "kill9-kernel", "sigstop-kernel", "hibernate", "cut-connection"}

// oomLimit is the sessions' memory limit where the sandbox runs, and oomTurn a chaos turn that
// allocates past it after its file write: the OOM killer ends the kernel in the middle of the turn.
const (
	oomLimit = "768Mi"
	oomTurn  = chaosTurn + "\n_big = b'x' * (1536 << 20)"
)

// chaosTurn is one turn of a chaos session: turnCode with a pause inside, so a fault lands in it.
const chaosTurn = "n = globals().get('n', 0) + 1\nlog = globals().get('log', []) + [n]\n" +
	"with open('turns.txt', 'a') as f: f.write(f'{n}\\n')\nimport time; time.sleep(0.3)\nprint(n)"

// model is what the harness knows of one session.
type model struct {
	id        string
	drv       runner // the client that drives it
	answered  int    // n of the last answered turn
	uncertain bool   // a turn was not answered (run_interrupted, a kernel death, ...): it may have run
	durable   int    // n of the last turn whose answer said its checkpoint committed
	unsaved   bool   // a turn since durable answered that its checkpoint (or record) failed
	raised    bool   // the unanswered turn's answer was its code's own error (it may have run in part)
	fileLag   int    // lines of turns.txt beyond n that files_ahead named (an unanswered turn's line)
	named     bool   // a restore report named turns.txt since the last check
}

// answer updates m from a turn that printed n: it ran. A turn whose answer said its checkpoint or
// its record failed ran in the live kernel but may not survive the kernel: a later restore may
// bring the session back as far as the last durable turn, which the product named in that answer.
func (m *model) answer(n int, res *client.RunResult) {
	m.answered, m.uncertain = n, false
	if res.CheckpointError != "" || res.RecordError != "" {
		m.unsaved = true
		return
	}
	m.durable, m.unsaved = n, false
}

// tally counts one fault kind's outcomes.
type tally struct{ injected, exact, named, silent, hung, damaged int }

func TestChaos(t *testing.T) {
	t.Parallel()
	faults := envInt("CARRYOVER_CHAOS_FAULTS", 1)
	seed := uint64(envInt("CARRYOVER_CHAOS_SEED", 1))
	env, sandbox := sandboxEnv()
	t.Logf("seed %d, %d faults, sandbox %v", seed, faults, sandbox)
	// The data dir (and the spool) on a small filesystem of its own, which the full-disk fault fills.
	var dir string
	if os.Geteuid() == 0 {
		dir = smallDisk(t, "1g")
		env = append(env, "CARRYOVER_PERSISTENCE_SPOOL_DIR="+filepath.Join(dir, "spool"))
	}
	p := servertest.StartProcess(t, servertest.Options{Token: "chaos", Dir: dir, Flags: []string{"--pool.size", "1"}, Env: env})
	h := newHarness(t, "one SQLite node", seed, strings.TrimPrefix(p.Base, "http://"), []*servertest.Process{p})
	h.kinds = slices.Clone(faultKinds)
	if sandbox {
		h.kinds = append(h.kinds, "oom-kernel")
	}
	if dir != "" {
		h.kinds = append(h.kinds, "full-disk")
		h.inject2 = func(kind string, _ *model) bool {
			if kind != "full-disk" {
				return false
			}
			filler := filepath.Join(dir, "filler")
			sandboxtest.FillDisk(t, filler)
			time.Sleep(time.Duration(500+h.rng.IntN(1500)) * time.Millisecond)
			os.Remove(filler)
			return true
		}
	}
	h.storeOK = func() bool { return sqliteOK(t, p.Dir) }
	h.run(faults, runners(t, h.c, "http://"+h.proxy.Addr(), p.Token))
}

// sandboxEnv is the servers' environment: the sandbox on where bubblewrap runs as root.
func sandboxEnv() (env []string, sandbox bool) {
	sandbox = os.Geteuid() == 0 && lookPath("bwrap")
	if !sandbox {
		env = append(env, "CARRYOVER_SANDBOX_ENABLED=false")
	}
	return env, sandbox
}

// newHarness puts a fault proxy in front of front (a server, or a load balancer before nodes) and
// a Go client behind it.
func newHarness(t *testing.T, topo string, seed uint64, front string, nodes []*servertest.Process) *harness {
	proxy, err := faultproxy.Start(front)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	c := client.New("http://"+proxy.Addr(), nodes[0].Token)
	return &harness{t: t, topo: topo, nodes: nodes, proxy: proxy, c: c, rng: rand.New(rand.NewPCG(seed, 2)),
		seed: seed, tallies: map[string]*tally{}}
}

// only narrows kinds to those CARRYOVER_CHAOS_KINDS names (comma-separated; unset: all), to
// replay or study one fault.
func only(kinds []string) []string {
	v := os.Getenv("CARRYOVER_CHAOS_KINDS")
	if v == "" {
		return kinds
	}
	return slices.DeleteFunc(kinds, func(k string) bool { return !slices.Contains(strings.Split(v, ","), k) })
}

// run creates a session for each runner (the Go, Python and Node clients), injects the faults one
// after another and prints the table.
func (h *harness) run(faults int, drivers []runner) {
	if h.kinds = only(h.kinds); len(h.kinds) == 0 {
		h.t.Skip("CARRYOVER_CHAOS_KINDS names no fault of this topology")
	}
	for i, drv := range drivers {
		m := &model{id: fmt.Sprintf("chaos%d-%s", i, drv.name()), drv: drv}
		if drv.name() == "jupyter" {
			m.id = fmt.Sprintf("c4a05000-0000-4000-8000-%012d", i) // Jupyter's kernel ids are UUIDs
		}
		req := client.CreateRequest{SessionID: m.id}
		if slices.Contains(h.kinds, "oom-kernel") {
			req.Sandbox = &client.SandboxRequest{Memory: oomLimit}
		}
		if _, err := h.c.CreateSession(h.t.Context(), req); err != nil {
			h.t.Fatal(err)
		}
		h.models = append(h.models, m)
		h.turn(m, chaosTurn) // each session has a kernel and a checkpoint before the first fault
	}
	for i := range faults {
		kind := h.kinds[h.rng.IntN(len(h.kinds))]
		h.fault(i, kind, h.models[h.rng.IntN(len(h.models))])
	}
	h.finalCheck()
	h.report(faults)
}

type harness struct {
	t       *testing.T
	topo    string
	seed    uint64
	nodes   []*servertest.Process
	proxy   *faultproxy.Proxy
	c       *client.Client
	rng     *rand.Rand
	kinds   []string
	models  []*model
	tallies map[string]*tally
	storeOK func() bool                      // the store is undamaged
	inject2 func(kind string, m *model) bool // the topology's own faults; false: not one of them
}

// turn runs one chaos turn on m and updates the model from its answer; false when it hung.
func (h *harness) turn(m *model, code string) bool {
	ctx, cancel := context.WithTimeout(h.t.Context(), 150*time.Second)
	defer cancel()
	res, err := m.drv.run(ctx, m.id, code)
	h.noteRestore(m, res)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		m.uncertain = true
		return false
	case err != nil || res.Status != "ok":
		h.t.Logf("%s: a turn not answered cleanly: %v (%+v)", m.id, err, res)
		m.uncertain = true
		m.raised = raised(res, err)
		return true
	}
	if res.CheckpointError != "" || res.RecordError != "" {
		h.t.Logf("%s: a turn answered with a failed checkpoint or record: %q %q", m.id, res.CheckpointError, res.RecordError)
	}
	if strings.TrimSpace(res.Stdout) == "" && m.drv.name() == "jupyter" {
		// Answered from the door's record: the request had run once, ok, on a connection that was
		// lost before its output reached this one.
		m.answer(m.answered+1, res)
		return true
	}
	n, perr := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if perr != nil {
		h.t.Fatalf("%s: the turn printed %q", m.id, res.Stdout)
	}
	m.answer(n, res)
	return true
}

// raised says whether an unclean turn's answer was its own code's error (the turn may have run in
// part), not a kernel death or a lost request: a status "error" with no API error code (the Go and
// Python clients) or the Jupyter door's execute_reply error other than KernelDied.
func raised(res *client.RunResult, err error) bool {
	if res == nil || res.Status != "error" || client.ErrorCode(err) != "" {
		return false
	}
	return err == nil || !strings.Contains(err.Error(), "KernelDied")
}

// noteRestore remembers a restore report that named the session's file.
func (h *harness) noteRestore(m *model, res *client.RunResult) {
	if res != nil && res.Restore != nil && slices.Contains(res.Restore.FilesAhead, "turns.txt") {
		m.named = true
	}
}

// fault injects kind at a random moment of a turn of m, recovers, and checks every session.
func (h *harness) fault(i int, kind string, m *model) {
	tl := h.tallies[kind]
	if tl == nil {
		tl = &tally{}
		h.tallies[kind] = tl
	}
	tl.injected++
	code := chaosTurn
	if kind == "oom-kernel" {
		code = oomTurn
	}
	start := time.Now()
	done := make(chan bool, 1)
	go func() { done <- h.turn(m, code) }()
	time.Sleep(time.Duration(50+h.rng.IntN(400)) * time.Millisecond)
	h.inject(kind, m)
	if !<-done {
		tl.hung++
	}
	outcome := "exact"
	for _, v := range h.checkAll() {
		switch v {
		case "silent":
			outcome = "silent"
		case "named":
			if outcome == "exact" {
				outcome = "named"
			}
		}
	}
	if !h.storeOK() {
		tl.damaged++
	}
	switch outcome {
	case "exact":
		tl.exact++
	case "named":
		tl.named++
	default:
		tl.silent++
	}
	h.t.Logf("fault %d: %s on %s (%s client): %s (%.1f s)", i, kind, m.id, m.drv.name(), outcome, time.Since(start).Seconds())
}

// inject makes the fault and its recovery (a restart, a SIGCONT).
func (h *harness) inject(kind string, m *model) {
	if h.inject2 != nil && h.inject2(kind, m) {
		return
	}
	switch kind {
	case "kill9-server":
		p := h.nodes[h.rng.IntN(len(h.nodes))]
		p.Kill9()
		p.Restart(h.t)
	case "sigstop-server":
		pid := h.nodes[h.rng.IntN(len(h.nodes))].PID()
		syscall.Kill(pid, syscall.SIGSTOP)
		time.Sleep(time.Duration(500+h.rng.IntN(2000)) * time.Millisecond)
		syscall.Kill(pid, syscall.SIGCONT)
	case "kill9-kernel", "sigstop-kernel":
		pids := h.kernelPIDs(m)
		sig := syscall.SIGKILL
		if kind == "sigstop-kernel" {
			sig = syscall.SIGSTOP
		}
		for _, pid := range pids {
			syscall.Kill(pid, sig)
		}
		if sig == syscall.SIGSTOP {
			time.Sleep(time.Duration(500+h.rng.IntN(2000)) * time.Millisecond)
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGCONT)
			}
		}
	case "hibernate":
		if _, err := h.c.Hibernate(h.t.Context(), m.id); err != nil {
			h.t.Logf("hibernate %s: %v", m.id, err) // refused while busy, say: named by its error
		}
	case "cut-connection":
		h.proxy.ResetAll()
	case "oom-kernel":
		// The turn itself allocates past the session's memory limit: the OOM killer ends the kernel.
	}
}

// kernelPIDs are the session's live kernel process (the pid of its last sandbox_created event) and
// every process below it (inside a sandbox the kernel is bwrap's child).
func (h *harness) kernelPIDs(m *model) []int {
	evs, err := h.c.Events(h.t.Context(), m.id, 0, 1000, "sandbox_created")
	if err != nil || len(evs) == 0 {
		h.t.Logf("%s: no sandbox_created event: %v", m.id, err)
		return nil
	}
	var pl struct {
		PID int `json:"pid"`
	}
	if err := jsonUnmarshal(evs[len(evs)-1].Payload, &pl); err != nil || pl.PID <= 0 {
		return nil
	}
	return append([]int{pl.PID}, descendants(pl.PID)...)
}

// check compares a session with its model: "exact", "named" (differs as the product said) or
// "silent". It reads n, len(log) and the file's lines in one run.
func (h *harness) check(m *model) string {
	ctx, cancel := context.WithTimeout(h.t.Context(), 150*time.Second)
	defer cancel()
	res, err := h.c.Run(ctx, m.id, client.RunRequest{Code: checkCode})
	h.noteRestore(m, res)
	switch client.ErrorCode(err) {
	case "kernel_died", "run_interrupted":
		// The fault's kill reached the kernel after the turn and before the server saw it die, or a
		// node paused or killed under the check cut its first attempt off (the client's retry with
		// the same key is then refused: it may have run). The check said so; it reads and changes
		// nothing: run it again, under a new key.
		h.t.Logf("%s: the check met %v; run again", m.id, err)
		res, err = h.c.Run(ctx, m.id, client.RunRequest{Code: checkCode})
		h.noteRestore(m, res)
	}
	if err != nil || res.Status != "ok" {
		h.t.Logf("%s: the check did not run: %v %+v", m.id, err, res)
		return "silent"
	}
	var n, l, f int
	if _, err := fmt.Sscan(res.Stdout, &n, &l, &f); err != nil {
		h.t.Errorf("%s: the check printed %q", m.id, res.Stdout) // checkAll's goroutine: no Fatal
		return "silent"
	}
	verdict := h.turnVerdict(m, n, l)
	if v := h.fileVerdict(m, n, f); v != "exact" && verdict != "silent" {
		verdict = v
	}
	m.answered, m.uncertain, m.named, m.raised = n, false, false, false
	if res.CheckpointError != "" || res.RecordError != "" {
		m.unsaved = true // the state read is live, not yet saved
	} else {
		m.durable, m.unsaved = n, false // the check's own turn committed the state it read
	}
	return verdict
}

// turnVerdict judges the session's turn counter n (and its log's length l) against the model.
func (h *harness) turnVerdict(m *model, n, l int) string {
	switch {
	case l != n:
		h.t.Logf("%s: n is %d but the log has %d entries", m.id, n, l)
		return "silent"
	case n == m.answered:
		return "exact"
	case n == m.answered+1 && m.uncertain:
		return "named" // the unanswered turn ran: its answer said so (run_interrupted, an error)
	case m.unsaved && n >= m.durable && n < m.answered:
		return "named" // restored to a checkpoint before turns whose answers said theirs failed
	}
	h.t.Logf("%s: at turn %d, the last answered was %d (unanswered: %v; durable %d, unsaved %v)",
		m.id, n, m.answered, m.uncertain, m.durable, m.unsaved)
	return "silent"
}

// fileVerdict judges turns.txt's f lines at turn n: lines beyond n are turns the session ran and a
// restore took back (an unanswered one, or answered ones whose checkpoint failed), each allowed only
// when a restore report named the file since the last check.
func (h *harness) fileVerdict(m *model, n, f int) string {
	lag := f - n
	extra := 0
	if m.uncertain {
		extra++
	}
	if m.unsaved && n < m.answered {
		extra += m.answered - n
	}
	switch {
	case lag == m.fileLag:
		return "exact"
	case lag > m.fileLag && lag <= m.fileLag+extra && m.named:
		m.fileLag = lag
		return "named"
	case lag > m.fileLag && lag <= 0 && n < m.answered:
		// The file was behind n (a turn raised before its line) and a restore took n back over
		// that turn: the file and the namespace agree again, nothing of the file to name.
		m.fileLag = lag
		return "exact"
	case lag < m.fileLag && m.named:
		// The file lost lines the checkpoint had (writes a failed host disk never got, kept from
		// the page cache by the checkpoint), and the restore named it as differing.
		m.fileLag = lag
		return "named"
	case lag == m.fileLag-1 && m.raised && n == m.answered+1:
		// The turn raised between its n += 1 and its line (a full disk, say): its answer said so.
		m.fileLag = lag
		return "named"
	}
	h.t.Logf("%s: turns.txt has %d lines at turn %d (lag %d, named %v)", m.id, f, n, m.fileLag, m.named)
	m.fileLag = lag // counted once: the next checks start from the file as it is
	return "silent"
}

// checkAll checks every session at once (each through its own run: after a server's restart each
// waits for a kernel of its own, and one after another they waited for each other's), returning
// their verdicts in the models' order.
func (h *harness) checkAll() []string {
	verdicts := make([]string, len(h.models))
	var wg sync.WaitGroup
	for i, m := range h.models {
		wg.Go(func() { verdicts[i] = h.check(m) })
	}
	wg.Wait()
	return verdicts
}

// sqliteOK runs SQLite's integrity_check on the store of the server in dir, beside it.
func sqliteOK(t *testing.T, dir string) bool {
	out, err := exec.Command("sqlite3", "-readonly", filepath.Join(dir, "data", "carryover.db"), "PRAGMA integrity_check").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Logf("integrity_check: %s %v", out, err)
		return false
	}
	return true
}

// finalCheck hibernates every session and checks it again: its state now comes from the store
// alone (its last checkpoint), so a checkpoint the faults damaged shows here. Counted under the
// row "final-restore".
func (h *harness) finalCheck() {
	tl := &tally{}
	h.tallies["final-restore"] = tl
	for _, m := range h.models {
		tl.injected++
		if _, err := h.c.Hibernate(h.t.Context(), m.id); err != nil {
			h.t.Logf("final hibernate %s: %v", m.id, err)
		}
	}
	for _, v := range h.checkAll() {
		switch v {
		case "exact":
			tl.exact++
		case "named":
			tl.named++
		default:
			tl.damaged++
		}
	}
}

// report prints the table per fault kind and fails the test on any silent loss, hang or damage.
func (h *harness) report(faults int) {
	seed := h.seed
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: seed %d, %d faults, %s\n", seed, faults, h.topo)
	fmt.Fprintf(&b, "| fault | injected | recovered exact | recovered, difference named | silent loss | hung requests | store damaged |\n|---|---|---|---|---|---|---|\n")
	bad := 0
	for _, k := range append(slices.Clone(h.kinds), "final-restore") {
		tl := h.tallies[k]
		if tl == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d |\n", k, tl.injected, tl.exact, tl.named, tl.silent, tl.hung, tl.damaged)
		bad += tl.silent + tl.hung + tl.damaged
	}
	h.t.Log("\n" + b.String())
	if path := os.Getenv("CARRYOVER_CHAOS_TABLE"); path != "" {
		appendFile(path, b.String()+"\n")
	}
	if bad > 0 {
		h.t.Fatalf("%d faults ended in a silent loss, a hung request or a damaged store (seed %d reproduces the sequence)", bad, seed)
	}
}

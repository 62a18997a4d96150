package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
	"github.com/carryover/carryover/kernel"
)

// capacity makes a node of n live kernels whose claims queue for queue.
func capacity(n int, queue time.Duration) func(*configs.Config) {
	return func(c *configs.Config) {
		c.Capacity.MaxLiveKernels = n
		c.Capacity.QueueSeconds = queue.Seconds()
		c.Cull.IdleSeconds = 0
	}
}

// TestCapacityHibernatesLeastRecentlyUsed: on the real binary with room for 4 live kernels (and no
// warm pool, so every kernel process is a session's), 20 sessions each set a variable, then each
// reads it back in random order, 4 at a time: every answer is right, no more than 4 kernel
// processes are ever alive (sampled throughout from /proc, and from /api/status), and the sessions
// that made room were hibernated with the reason capacity. Each kernel carries oom_score_adj 800.
func TestCapacityHibernatesLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	p := servertest.StartProcess(t, servertest.Options{Token: testToken, Flags: []string{"--pool.size", "0"},
		Env: []string{"CARRYOVER_SANDBOX_ENABLED=false", "CARRYOVER_POOL_MAX_SIZE=0", "CARRYOVER_CAPACITY_MAX_LIVE_KERNELS=4",
			"CARRYOVER_CAPACITY_QUEUE_SECONDS=300", "CARRYOVER_CULL_IDLE_SECONDS=0"}})
	c := newClient(p.Base, testToken)
	ctx := t.Context()

	var maxProcs, maxLive, samples atomic.Int64
	var oomChecked atomic.Bool
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			kernels := kernelChildren(p.PID())
			maxProcs.Store(max(maxProcs.Load(), int64(len(kernels))))
			for _, pid := range kernels {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid)); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(kernel.KernelOOMScoreAdj) {
					oomChecked.Store(true)
				}
			}
			if st, err := c.Status(ctx); err == nil {
				maxLive.Store(max(maxLive.Load(), int64(st.Capacity.LiveKernels)))
			}
			samples.Add(1)
		}
	}()

	const n = 20
	ids := make([]string, n)
	for i := range ids {
		ids[i] = servertest.ID(t)
		if _, err := c.CreateSession(ctx, client.CreateRequest{SessionID: ids[i]}); err != nil {
			t.Fatal(err)
		}
	}
	inParallel(t, 4, n, func(i int) error {
		r, err := c.Run(ctx, ids[i], client.RunRequest{Code: fmt.Sprintf("v = %d * 7", i)})
		if err == nil && r.Status != "ok" {
			err = fmt.Errorf("status %s: %s", r.Status, dump(r.Error))
		}
		return err
	})
	order := rand.Perm(n)
	inParallel(t, 4, n, func(j int) error {
		i := order[j]
		r, err := c.Run(ctx, ids[i], client.RunRequest{Code: "v"})
		if err != nil {
			return err
		}
		if got, want := resultOf(r), strconv.Itoa(i*7); got != want {
			return fmt.Errorf("session %d: v = %q, want %s", i, got, want)
		}
		return nil
	})
	close(stop)
	<-sampled

	if samples.Load() < 10 {
		t.Fatalf("only %d samples were taken", samples.Load())
	}
	if got := maxProcs.Load(); got > 4 {
		t.Errorf("%d kernel processes were alive at once; capacity is 4", got)
	}
	if got := maxLive.Load(); got > 4 || got == 0 {
		t.Errorf("status showed up to %d live kernels; capacity is 4", got)
	}
	if !oomChecked.Load() {
		t.Errorf("no kernel process was seen with oom_score_adj %d", kernel.KernelOOMScoreAdj)
	}
	hibernated := 0
	for _, id := range ids {
		evs, err := c.Events(ctx, id, 0, 1000, "session_hibernated")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			var pl struct{ Reason string }
			_ = json.Unmarshal(e.Payload, &pl)
			if pl.Reason != "capacity" {
				t.Errorf("session %s hibernated for %q, want capacity", id, pl.Reason)
			}
			hibernated++
		}
	}
	// 20 sessions through 4 slots, twice: at least 16 made room in each round.
	if hibernated < 32 {
		t.Errorf("%d session_hibernated events with reason capacity, want at least 32", hibernated)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Evictions["capacity"] != int64(hibernated) || st.Sessions.Live > 4 || st.Sessions.Total != n || st.Capacity.MaxLiveKernels != 4 {
		t.Errorf("status = %s, want %d capacity evictions", dump(st), hibernated)
	}
}

// kernelChildren lists the kernel processes (ipykernel) whose parent is pid, or a kernel template
// (kernel/template) that is pid's child: forked kernels are the template's children.
func kernelChildren(pid int) []int {
	type proc struct {
		ppid int
		cmd  string
	}
	procs := map[int]proc{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so parse after the last ')'.
		s := string(b)
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(rest) < 2 || rest[0] == "Z" {
			continue
		}
		self, _ := strconv.Atoi(strings.Fields(s)[0])
		ppid, _ := strconv.Atoi(rest[1])
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", self))
		procs[self] = proc{ppid: ppid, cmd: string(cmd)}
	}
	var out []int
	for self, p := range procs {
		parent := p.ppid == pid || strings.Contains(procs[p.ppid].cmd, "carryover_template") && procs[p.ppid].ppid == pid
		if parent && strings.Contains(p.cmd, "ipykernel") {
			out = append(out, self)
		}
	}
	return out
}

// inParallel runs do(0..n-1) on workers goroutines, failing the test with every error.
func inParallel(t *testing.T, workers, n int, do func(i int) error) {
	t.Helper()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("%d: %v", i, err))
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
}

// busyNode starts a server of 4 live kernels queueing for queue, and keeps all 4 busy with cells
// that sleep until interrupted. It returns the server and the 4 sessions; their runs' answers
// arrive on the channel once interrupted.
func busyNode(t *testing.T, queue time.Duration) (*testServer, []string, chan *client.RunResult) {
	ts := startServer(t, "", capacity(4, queue), func(c *configs.Config) { c.Pool.Size = 0; c.Pool.MaxSize = 0 })
	ids := make([]string, 4)
	done := make(chan *client.RunResult, 4)
	for i := range ids {
		ids[i] = servertest.ID(t)
		ts.newSession(client.CreateRequest{SessionID: ids[i]})
		ts.run(ids[i], fmt.Sprintf("me = %d", i))
		go func() {
			r, err := ts.c.Run(context.Background(), ids[i], client.RunRequest{Code: busyCell})
			if err != nil {
				t.Errorf("busy run %d: %v", i, err)
			}
			done <- r
		}()
	}
	for _, id := range ids {
		waitBusy(t, ts, id)
	}
	return ts, ids, done
}

// busyCell runs until interrupted, after it touches the file started: the kernel is executing it
// (an interrupt sent before would be lost, and the cell would run until its timeout).
const busyCell = "import pathlib, time\npathlib.Path('started').touch()\nwhile True: time.sleep(0.05)"

// waitBusy waits until session id's kernel is running busyCell.
func waitBusy(t *testing.T, ts *testServer, id string) {
	t.Helper()
	waitUntil(t, id+" running its busy cell", func() bool {
		_, err := ts.c.GetFile(ts.ctx(), id, "started")
		return err == nil
	})
}

// TestCapacityAllBusyAnswers429: with all 4 live kernels busy, a fifth session's turn waits the
// queue time, then answers 429 capacity with Retry-After and a message saying why; nothing of the
// busy sessions is touched.
func TestCapacityAllBusyAnswers429(t *testing.T) {
	t.Parallel()
	ts, ids, done := busyNode(t, time.Second)
	fifth := servertest.ID(t)
	ts.newSession(client.CreateRequest{SessionID: fifth})
	res := rawRun(t, ts, fifth, "1+1")
	if e := capacityRefusal(t, res, "1"); !strings.Contains(e.Message, "4 of 4 kernels busy") {
		t.Errorf("429 body = %s", res.body)
	}
	st, err := ts.c.Status(ts.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if st.Refusals["busy"] != 1 || st.Capacity.QueuedTotal != 1 || st.Sessions.Busy != 4 || len(st.Evictions) != 0 {
		t.Errorf("status after the refusal = %s", dump(st))
	}
	if m := ts.metrics(); !strings.Contains(m, `carryover_capacity_refusals_total{reason="busy"}`) {
		t.Error("no carryover_capacity_refusals_total in /metrics")
	}
	// A create that starts its session, refused the same way, leaves no session behind: with a
	// generated id the caller could not even delete it, and a retry must meet the refusal, not a 409.
	sixth := servertest.ID(t)
	for _, body := range []string{`{"start": true}`, `{"session_id": "` + sixth + `", "start": true}`, `{"session_id": "` + sixth + `", "start": true}`} {
		capacityRefusal(t, rawPost(t, ts, "/api/sessions", body), "1")
	}
	if list, err := ts.c.ListSessions(ts.ctx()); err != nil || len(list) != 5 {
		t.Errorf("sessions after three refused creates = %s (%v), want the 5 made before", dump(list), err)
	}
	for _, id := range ids {
		ts.act(ts.c.Interrupt, id)
	}
	for range ids {
		<-done
	}
	for i, id := range ids {
		if got := resultOf(ts.run(id, "me")); got != strconv.Itoa(i) {
			t.Errorf("session %d after the refusal: me = %q", i, got)
		}
	}
}

// TestCapacitySlotFreedInsideQueueTime: with all 4 live kernels busy, a fifth session's turn
// queues; one busy turn ending inside the queue time lets it through, the now idle session
// hibernated (reason capacity) to make room, and that session keeps its variables.
func TestCapacitySlotFreedInsideQueueTime(t *testing.T) {
	t.Parallel()
	ts, ids, done := busyNode(t, 5*time.Minute)
	fifth := servertest.ID(t)
	ts.newSession(client.CreateRequest{SessionID: fifth})
	got := make(chan *client.RunResult, 1)
	go func() {
		r, err := ts.c.Run(context.Background(), fifth, client.RunRequest{Code: "'through'"})
		if err != nil {
			t.Errorf("fifth run: %v", err)
		}
		got <- r
	}()
	waitUntil(t, "the fifth turn queued", func() bool {
		st, err := ts.c.Status(ts.ctx())
		return err == nil && st.Capacity.Queued == 1
	})
	ts.act(ts.c.Interrupt, ids[2])
	<-done
	if r := <-got; resultOf(r) != "'through'" {
		t.Fatalf("fifth run = %s", dump(r))
	}
	evs := ts.events(ids[2], 0, 100, "session_hibernated")
	if len(evs) != 1 || !strings.Contains(string(evs[0].Payload), `"reason":"capacity"`) {
		t.Errorf("the freed session's hibernations = %s", dump(evs))
	}
	for _, i := range []int{0, 1, 3} {
		if evs := ts.events(ids[i], 0, 100, "session_hibernated"); len(evs) != 0 {
			t.Errorf("busy session %d was hibernated: %s", i, dump(evs))
		}
	}
	for _, i := range []int{0, 1, 3} {
		ts.act(ts.c.Interrupt, ids[i])
		<-done
	}
	if got := resultOf(ts.run(ids[2], "me")); got != "2" {
		t.Errorf("the hibernated session woke with me = %q", got)
	}
}

// TestMemoryPressureHibernatesIdleNeverBusy: a memory budget far below what kernels hold
// (capacity.memory_budget_bytes, pressure without exhausting the machine) hibernates the idle
// sessions (reason memory), never one running a turn; the busy one's turn completes in its own
// kernel, and every session keeps its variables.
func TestMemoryPressureHibernatesIdleNeverBusy(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", capacity(4, time.Minute), func(c *configs.Config) { c.Capacity.MemoryBudgetBytes = 1 })
	idle := []string{servertest.ID(t), servertest.ID(t)}
	busy := servertest.ID(t)
	// The busy session runs from its first turn on: it is never idle before the test interrupts it.
	ts.newSession(client.CreateRequest{SessionID: busy})
	done := make(chan *client.RunResult, 1)
	go func() {
		r, err := ts.c.Run(context.Background(), busy, client.RunRequest{Code: "me = 2\n" + busyCell})
		if err != nil {
			t.Errorf("busy run: %v", err)
		}
		done <- r
	}()
	waitBusy(t, ts, busy)
	for i, id := range idle {
		ts.newSession(client.CreateRequest{SessionID: id})
		ts.run(id, fmt.Sprintf("me = %d", i))
	}
	waitUntil(t, "the idle sessions hibernated for memory", func() bool {
		for _, id := range idle {
			evs := ts.events(id, 0, 100, "session_hibernated")
			if len(evs) == 0 || !strings.Contains(string(evs[0].Payload), `"reason":"memory"`) {
				return false
			}
		}
		return true
	})
	// The busy session still has its kernel and its turn: interrupting it ends that turn.
	if s := ts.session(busy); s.Sandbox.Status != "live" {
		t.Errorf("busy session's sandbox = %s", s.Sandbox.Status)
	}
	if evs := ts.events(busy, 0, 100, "session_hibernated"); len(evs) != 0 {
		t.Errorf("the busy session was hibernated: %s", dump(evs))
	}
	ts.act(ts.c.Interrupt, busy)
	if r := <-done; r == nil || r.Error == nil || r.Error.EName != "KeyboardInterrupt" {
		t.Errorf("busy run = %s, want its own KeyboardInterrupt", dump(r))
	}
	st, err := ts.c.Status(ts.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if st.Evictions["memory"] < 2 || st.Capacity.MemoryBudgetBytes != 1 {
		t.Errorf("status = %s", dump(st))
	}
	for i, id := range append(append([]string{}, idle...), busy) {
		if got := resultOf(ts.run(id, "me")); got != strconv.Itoa(i) {
			t.Errorf("session %d: me = %q", i, got)
		}
	}
}

// TestBurstOfCreatesGrowsThePool: a burst of concurrent creates, each running its first cell, all
// succeed, and the warm pool grew toward pool.max_size to meet it (its target may be back to
// pool.size by the end: the claims all came at the start). 16 sessions rather than 40: the test
// machine has 2 cores shared with the rest of the suite; the bench's capacity section measures the
// burst's rate.
func TestBurstOfCreatesGrowsThePool(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) { c.Pool.Size = 1; c.Pool.MaxSize = 6 })
	const n = 16
	inParallel(t, n, n, func(i int) error {
		id := servertest.ID(t)
		if _, err := ts.c.CreateSession(ts.ctx(), client.CreateRequest{SessionID: id}); err != nil {
			return err
		}
		r, err := ts.c.Run(ts.ctx(), id, client.RunRequest{Code: fmt.Sprintf("%d + 1", i)})
		if err != nil {
			return err
		}
		if got := resultOf(r); got != strconv.Itoa(i+1) {
			return fmt.Errorf("answer %q", got)
		}
		return nil
	})
	st, err := ts.c.Status(ts.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if st.Pool.Grown == 0 || st.Pool.Misses == 0 || st.Sessions.Live != n {
		t.Errorf("after the burst: %s, want the pool grown", dump(st))
	}
}

// rawAnswer is an HTTP answer with its headers.
type rawAnswer struct {
	*http.Response
	body []byte
}

// rawRun posts a run without the typed client (which may retry a 429).
// capacityRefusal checks that res is a 429 with Retry-After retry and the capacity code, and returns
// its error body.
func capacityRefusal(t *testing.T, res rawAnswer, retry string) client.ErrorBody {
	t.Helper()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != retry {
		t.Fatalf("%d Retry-After %q %s, want 429 with Retry-After %s", res.StatusCode, res.Header.Get("Retry-After"), res.body, retry)
	}
	var body struct {
		Error client.ErrorBody `json:"error"`
	}
	if err := json.Unmarshal(res.body, &body); err != nil || body.Error.Code != "capacity" {
		t.Fatalf("429 body = %s (%v)", res.body, err)
	}
	return body.Error
}

func rawRun(t *testing.T, ts *testServer, id, code string) rawAnswer {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"code": code})
	return rawPost(t, ts, "/api/sessions/"+id+"/run", string(b))
}

// rawPost posts a JSON body to path and answers the response with its body read.
func rawPost(t *testing.T, ts *testServer, path, body string) rawAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ts.ctx(), http.MethodPost, ts.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawAnswer{Response: res, body: data}
}

// waitUntil polls cond every 20 ms for up to 2 minutes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKernelStartTimeoutAnswers429: a kernel that does not start within
// kernel.startup_timeout_seconds (an overloaded node; here a timeout no start can meet) is a 429
// capacity answer, reason start_timeout, with Retry-After: it was a 500 "internal" that told a
// client nothing could be done.
func TestKernelStartTimeoutAnswers429(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", func(c *configs.Config) {
		c.Pool.Size, c.Pool.MaxSize = 0, 0
		// 1 ms: a kernel forked from a warm template on a quiet machine started within 50 ms (this
		// test once used 0.05 s and answered 200), but no start forks, connects and answers
		// kernel_info in a millisecond.
		c.Kernel.StartupTimeoutSeconds = 0.001
	})
	id := servertest.ID(t)
	ts.newSession(client.CreateRequest{SessionID: id})
	res := rawRun(t, ts, id, "1+1")
	if e := capacityRefusal(t, res, "5"); e.Details["reason"] != "start_timeout" ||
		!strings.Contains(e.Message, "did not start within its startup timeout") {
		t.Errorf("429 body = %s", res.body)
	}
	if st, err := ts.c.Status(ts.ctx()); err != nil || st.Refusals["start_timeout"] != 1 {
		t.Errorf("status refusals = %v (%v)", st.Refusals, err)
	}
}

// TestPausedSessionsMakeRoom: a paused session keeps its kernel, but not its slot for ever. On a node
// of one live kernel, a paused session is hibernated (reason capacity) to let another session's turn
// in; it stays paused (its turns still answer session_paused), and after Resume it wakes with its
// variables. A paused session idle for cull.idle_seconds is hibernated too (reason idle). Before,
// both skipped paused sessions: the second session waited out the queue time and got a 429.
func TestPausedSessionsMakeRoom(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", capacity(1, 20*time.Second))
	paused, other := servertest.ID(t), servertest.ID(t)
	ts.newSession(client.CreateRequest{SessionID: paused})
	ts.newSession(client.CreateRequest{SessionID: other})
	ts.run(paused, "me = 'paused'")
	ts.act(ts.c.Pause, paused)
	if got := resultOf(ts.run(other, "me = 'other'\nme")); got != "'other'" {
		t.Fatalf("the other session's turn = %q", got)
	}
	evs := ts.events(paused, 0, 100, "session_hibernated")
	if len(evs) != 1 || !strings.Contains(string(evs[0].Payload), `"reason":"capacity"`) {
		t.Fatalf("the paused session's hibernations = %s", dump(evs))
	}
	if s := ts.session(paused); s.State != client.StatePaused {
		t.Fatalf("the hibernated session is %s, want paused", s.State)
	}
	errCode(t, errOf(ts.c.Run(ts.ctx(), paused, client.RunRequest{Code: "me"})), http.StatusConflict, "session_paused")
	ts.act(ts.c.Resume, paused)
	if got := resultOf(ts.run(paused, "me")); got != "'paused'" {
		t.Fatalf("the resumed session woke with me = %q", got)
	}
	if evs := ts.events(other, 0, 100, "session_hibernated"); len(evs) != 1 {
		t.Fatalf("the other session made room for the resumed one: %s", dump(evs))
	}

	// The idle cull.
	cull := startServer(t, "", func(c *configs.Config) { c.Cull.IdleSeconds = 1 })
	id := servertest.ID(t)
	cull.newSession(client.CreateRequest{SessionID: id})
	cull.run(id, "me = 'culled'")
	cull.act(cull.c.Pause, id)
	waitUntil(t, "the paused session culled", func() bool {
		evs := cull.events(id, 0, 100, "session_hibernated")
		return len(evs) == 1 && strings.Contains(string(evs[0].Payload), `"reason":"idle"`)
	})
	cull.act(cull.c.Resume, id)
	if got := resultOf(cull.run(id, "me")); got != "'culled'" {
		t.Fatalf("the culled paused session woke with me = %q", got)
	}
}

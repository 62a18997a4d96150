package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/carryover/carryover/client"
	"golang.org/x/sync/errgroup"
)

// Overload (docs/capacity.md): twice as many sessions as the node has live-kernel slots run turns
// back to back for a minute (CARRYOVER_BENCH_OVERLOAD_SECONDS, 10 s with --quick), on a server in a
// process of its own so that its memory is its own. Every session set a variable of its own at its
// first turn and checks it, with a counter of its turns, in every turn after. The targets, said in
// the rows: no failed turn but 429s, no variable lost, the server's RSS flat. Beside them: the same
// turn on a node with room (the floor of its latency) and the server's RSS before the load.

const (
	overloadSlots = 4 // the node's capacity; 2x as many sessions
	overloadQueue = 5 // capacity.queue_seconds: a claim waits this long, then 429
	// overloadCell checks the session's variable and counts its turns, kept busy a moment.
	overloadCell = "import time\nassert v == %q, v\nn += 1\ntime.sleep(0.2)\nf'{v}:{n}'"
)

// overloadStats is what the sessions' loops saw.
type overloadStats struct {
	mu                     sync.Mutex
	ok, refused, failed    int
	lost                   int
	firstFailure, lostWhat string
	lat                    []time.Duration
}

func benchCapacityOverload(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	dur := time.Minute
	if env.Quick {
		dur = 3 * time.Second
	}
	if s, err := strconv.ParseFloat(os.Getenv("CARRYOVER_BENCH_OVERLOAD_SECONDS"), 64); err == nil && s > 0 {
		dur = time.Duration(s * float64(time.Second))
	}
	token := benchRandHex(16)
	proc, c, err := spawnBenchServer(env, "capacity-overload", token,
		"CARRYOVER_CAPACITY_MAX_LIVE_KERNELS="+strconv.Itoa(overloadSlots), "CARRYOVER_CAPACITY_QUEUE_SECONDS="+strconv.Itoa(overloadQueue),
		"CARRYOVER_CULL_IDLE_SECONDS=0")
	if err != nil {
		return nil, err
	}
	defer proc.Stop()
	pid := proc.PID()
	c = client.New(c.BaseURL(), token, client.WithRetry(client.RetryPolicy{MaxAttempts: 1})) // a 429 is counted, then waited out here
	idle := procRSS(pid)
	n := 2 * overloadSlots
	ids := make([]string, n)
	floor, err := overloadSetUp(ctx, c, ids)
	if err != nil {
		return nil, err
	}
	mem := overloadMem{idle: idle, start: procRSS(pid), heapStart: heapInUse(ctx, c.BaseURL()),
		anonStart: procStatus(pid, "RssAnon"), fileStart: procStatus(pid, "RssFile")}
	st := &overloadStats{}
	mem.samples = overloadRun(ctx, c, ids, dur, st, pid)
	mem.end, mem.heapEnd = procRSS(pid), heapInUse(ctx, c.BaseURL())
	mem.anonEnd, mem.fileEnd = procStatus(pid, "RssAnon"), procStatus(pid, "RssFile")
	mem.goSysEnd = goMetric(ctx, c.BaseURL(), "go_memstats_sys_bytes")
	status, _ := client.New(c.BaseURL(), token).Status(ctx)
	return overloadRows(st, n, dur, floor, mem, status), nil
}

// overloadMem is the server's memory: RSS idle (no session yet), at the load's start, every
// second of it and at its end; the Go heap in use at the start and the end.
type overloadMem struct {
	idle, start, end   int64
	samples            []int64
	heapStart, heapEnd int64
	// RSS split: anonymous memory (the Go runtime, SQLite's page caches), and mapped files (the
	// binary's code as new paths run, SQLite's shared memory), at the load's start and end.
	anonStart, fileStart, anonEnd, fileEnd int64
	goSysEnd                               int64 // what the Go runtime holds from the OS at the end
}

// warm is the RSS a quarter into the load: the start of the steady state, past the Go runtime's
// growth to its working heap.
func (m overloadMem) warm() int64 {
	if len(m.samples) == 0 {
		return m.start
	}
	return m.samples[len(m.samples)/4]
}

// heapInUse is go_memstats_heap_inuse_bytes of the server's /metrics (0 when unknown).
func heapInUse(ctx context.Context, base string) int64 {
	return goMetric(ctx, base, "go_memstats_heap_inuse_bytes")
}

// goMetric is one unlabelled figure of the server's /metrics (0 when unknown).
func goMetric(ctx context.Context, base, name string) int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f)
		}
	}
	return 0
}

// overloadSetUp creates the sessions, each setting its variable, and measures the floor: the
// overload's cell in the first session while the node has room (the others not started yet).
func overloadSetUp(ctx context.Context, c *client.Client, ids []string) (time.Duration, error) {
	var floor []time.Duration
	for i := range ids {
		s, err := c.CreateSession(ctx, client.CreateRequest{})
		if err != nil {
			return 0, err
		}
		ids[i] = s.ID
		if _, err := c.Run(ctx, s.ID, client.RunRequest{Code: fmt.Sprintf("v = %q\nn = 0", s.ID)}); err != nil {
			return 0, err
		}
		for j := 0; i == 0 && j < 10; j++ {
			t0 := time.Now()
			if _, err := c.Run(ctx, s.ID, client.RunRequest{Code: fmt.Sprintf(overloadCell, s.ID)}); err != nil {
				return 0, err
			}
			floor = append(floor, time.Since(t0))
		}
	}
	return percentile(floor, 50), nil
}

// overloadRun runs every session's loop for dur, sampling the server's RSS every second; it
// returns the samples.
func overloadRun(ctx context.Context, c *client.Client, ids []string, dur time.Duration, st *overloadStats, pid int) []int64 {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var g errgroup.Group
	for i, id := range ids {
		g.Go(func() error {
			overloadLoop(ctx, c, id, i == 0, st)
			return nil
		})
	}
	var samples []int64
	for tick := time.NewTicker(time.Second); ctx.Err() == nil; {
		select {
		case <-tick.C:
			samples = append(samples, procRSS(pid))
		case <-ctx.Done():
			tick.Stop()
		}
	}
	_ = g.Wait() // the loops count their failures in st
	return samples
}

// overloadLoop runs one session's turns back to back until ctx ends: a 429 is counted and waited
// out (its Retry-After); any other failure is a failed turn; an answer whose variable is missing or
// wrong, or whose counter went back, is a lost variable. The first session ran 10 more turns (the
// floor), so its counter starts there.
func overloadLoop(ctx context.Context, c *client.Client, id string, first bool, st *overloadStats) {
	last := 0
	if first {
		last = 10
	}
	for ctx.Err() == nil {
		t0 := time.Now()
		r, err := c.Run(context.WithoutCancel(ctx), id, client.RunRequest{Code: fmt.Sprintf(overloadCell, id)})
		d := time.Since(t0)
		var e *client.Error
		switch {
		case errors.As(err, &e) && e.Status == 429:
			st.note(func() { st.refused++ })
			sleepCtx(ctx, time.Second)
		case err != nil:
			st.fail(fmt.Sprintf("%s: %v", id, err))
		case r.CheckpointError != "" || r.RecordError != "":
			st.fail(fmt.Sprintf("%s: checkpoint %q record %q", id, r.CheckpointError, r.RecordError))
		case r.Status != "ok":
			st.lose(fmt.Sprintf("%s: %s", id, runErrText(r)))
		default:
			n, ok := overloadCount(resultText(r), id)
			if !ok || n <= last {
				st.lose(fmt.Sprintf("%s: %s after turn %d", id, resultText(r), last))
			}
			last = n
			st.note(func() { st.ok++; st.lat = append(st.lat, d) })
		}
	}
}

// overloadCount parses the cell's answer 'v:n', checking v.
func overloadCount(text, id string) (int, bool) {
	v, n, ok := strings.Cut(strings.Trim(text, `'"`), ":")
	k, err := strconv.Atoi(n)
	return k, ok && err == nil && v == id
}

func (st *overloadStats) note(f func()) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f()
}

func (st *overloadStats) fail(what string) {
	st.note(func() {
		st.failed++
		if st.firstFailure == "" {
			st.firstFailure = what
		}
	})
}

func (st *overloadStats) lose(what string) {
	st.note(func() {
		st.lost++
		if st.lostWhat == "" {
			st.lostWhat = what
		}
	})
}

// overloadRows are the section's rows: each figure with its target or its floor.
func overloadRows(st *overloadStats, n int, dur, floor time.Duration, mem overloadMem, status *client.NodeStatus) []benchRow {
	name := fmt.Sprintf("overload %dx: %d sessions on %d kernels for %s", n/overloadSlots, n, overloadSlots, dur.Round(time.Second))
	evicted, refusals := "?", "?"
	if status != nil {
		evicted, refusals = strconv.FormatInt(status.Evictions["capacity"], 10),
			fmt.Sprintf("busy %d, queue_full %d", status.Refusals["busy"], status.Refusals["queue_full"])
	}
	lostNote := "each turn checks its session's variable and turn counter"
	if st.lostWhat != "" {
		lostNote += "; first: " + benchClip(st.lostWhat, 160)
	}
	p50, p99 := percentile(st.lat, 50), percentile(st.lat, 99)
	return []benchRow{
		{Name: name + ", turns served", Ours: fmt.Sprintf("%d (%.1f/s)", st.ok, float64(st.ok)/dur.Seconds()),
			Peer: fmtDur(floor) + " p50 (the same turn, node with room)", Ratio: ratio(p50, floor) + " p50",
			Note: fmt.Sprintf("p50 %s p99 %s; %s hibernations to make room", fmtDur(p50), fmtDur(p99), evicted)},
		{Name: "  failed turns other than 429", Ours: strconv.Itoa(st.failed), Peer: "0 (target)", Ratio: pass(st.failed == 0),
			Note: benchClip(st.firstFailure, 200)},
		{Name: "  lost variables", Ours: strconv.Itoa(st.lost), Peer: "0 (target)", Ratio: pass(st.lost == 0),
			Note: lostNote},
		{Name: "  429 capacity answers", Ours: strconv.Itoa(st.refused), Peer: fmt.Sprintf("%d turns served", st.ok),
			Note: fmt.Sprintf("queue %d s, each waited out 1 s; the server's refusals: %s", overloadQueue, refusals)},
		{Name: "  server RSS, end of the load", Ours: fmtBytes(mem.end), Peer: fmtBytes(mem.warm()) + " (a quarter in)", Ratio: fmt.Sprintf("%.2fx", float64(mem.end)/float64(mem.warm())),
			Note: fmt.Sprintf("target: flat; %s at the load's start, peak %s, %s idle before any session; start -> end: anonymous %s -> %s, files %s -> %s, Go heap in use %s -> %s (the Go runtime holds %s)",
				fmtBytes(mem.start), fmtBytes(slices.Max(append(mem.samples, mem.end))), fmtBytes(mem.idle), fmtBytes(mem.anonStart), fmtBytes(mem.anonEnd),
				fmtBytes(mem.fileStart), fmtBytes(mem.fileEnd), fmtBytes(mem.heapStart), fmtBytes(mem.heapEnd), fmtBytes(mem.goSysEnd))},
	}
}

func pass(ok bool) string {
	if ok {
		return "ok"
	}
	return "CHECK"
}

// procRSS is VmRSS of process pid in bytes (0 when unknown).
func procRSS(pid int) int64 { return procStatus(pid, "VmRSS") }

// procStatus is a kB field of /proc/pid/status in bytes (0 when unknown).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resultText is a run's text/plain result ("" without one).
func resultText(r *client.RunResult) string {
	if r.Result == nil {
		return ""
	}
	return *r.Result
}

// runErrText says what a run's error was.
func runErrText(r *client.RunResult) string {
	if r.Error == nil {
		return r.Status
	}
	return fmt.Sprintf("%s %s: %s", r.Status, r.Error.EName, r.Error.EValue)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

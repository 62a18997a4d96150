package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"golang.org/x/sync/errgroup"
)

// The templates section (issue 40; pool.templates, kernel/template): kernels forked from a warm
// template that imported ipykernel, numpy and pandas once. The sandbox on (the default config's)
// wherever this host runs it, quick mode included (the rows are the sandbox's: each kernel
// is forked into its own box, docs/sandbox.md), on both sides, pre_import numpy+pandas:
//   - create -> first result with numpy+pandas importable, the pool drained (size 0: every claim
//     makes a kernel), beside the same with templates off (a cold start and the imports);
//   - a burst of 20 creates at once, each importing numpy+pandas and then making a 1,000-row frame,
//     on the default pool, templates on beside off; then the burst of 100 with templates,
//     beside one cold start measured in the same run;
//   - the server's CPU per idle live session once the burst is over, beside the server's own with
//     one session before it (templates_idle.go);
//   - private memory (USS: smaps_rollup Private_Clean + Private_Dirty) per idle data-science
//     session after the burst, beside the same sessions' kernels with templates off, and the
//     template's own cost at rest.

const (
	tplImports = "import numpy, pandas\n2+2"
	tplFrame   = "df = pandas.DataFrame({'a': range(1000), 'b': [str(i) for i in range(1000)]})\nint(df.a.sum())"
)

func benchTemplates(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	nCold, nFirst, nPair, nBurst, spares := 4, 20, 20, 100, !env.Quick
	if env.Quick {
		nCold, nFirst, nPair, nBurst = 1, 2, 2, 3
	}
	// CARRYOVER_BENCH_TEMPLATES_FIRST sets the first-result rows' sessions (and the cold peer's), and
	// runs the spare-box comparison in quick mode too: those rows without the bursts.
	if v, err := strconv.Atoi(os.Getenv("CARRYOVER_BENCH_TEMPLATES_FIRST")); err == nil && v > 0 {
		nCold, nFirst, spares = v, v, true
	}
	coldLat, coldUSS, rows, err := tplColdPeer(ctx, env, nCold)
	if err != nil {
		return rows, fmt.Errorf("cold peer: %w", err)
	}
	r, err := tplFirstResult(ctx, env, nFirst, coldLat, spares)
	if rows = append(rows, r...); err != nil {
		return rows, err
	}
	r, err = tplBurstPair(ctx, env, nPair)
	if rows = append(rows, r...); err != nil {
		return rows, err
	}
	r, err = tplBurst(ctx, env, nBurst, percentile(coldLat, 50), coldUSS)
	return append(rows, r...), err
}

// tplSrv is a bench server with templates on or off, the sandbox on where it runs, pre-importing
// numpy and pandas.
func tplSrv(ctx context.Context, env *benchEnv, name string, templates, drained bool, tweak ...func(*configs.Config)) (*benchSrv, error) {
	return startBenchSrv(ctx, env, name, func(c *configs.Config) {
		for _, f := range tweak {
			defer f(c)
		}
		c.Sandbox.Enabled = benchSandboxOK()
		c.Pool.Templates = templates
		if drained {
			c.Pool.Size, c.Pool.MaxSize = 0, 0
		}
		c.Persistence.PreImport = []string{"numpy", "pandas"}
		c.Cull.IdleSeconds = 0
		c.Capacity.MaxLiveKernels = -1
	})
}

// firstResults creates n sessions one after another, each timed from the create to the answer of
// its first cell (tplImports); they stay live.
func firstResults(ctx context.Context, h *benchSrv, n int) ([]string, []time.Duration, error) {
	ids, lat := make([]string, n), make([]time.Duration, n)
	for i := range n {
		t := time.Now()
		s, err := h.c.CreateSession(ctx, client.CreateRequest{})
		if err != nil {
			return nil, nil, err
		}
		if err := runWant(ctx, h.c, s.ID, tplImports, "4"); err != nil {
			return nil, nil, err
		}
		ids[i], lat[i] = s.ID, time.Since(t)
	}
	return ids, lat, nil
}

// tplColdPeer is the peer of both rows: with templates off and the pool drained, n sessions' create ->
// first result, then their kernels' USS once each also holds the frame (rows: only the errors its
// server logged).
func tplColdPeer(ctx context.Context, env *benchEnv, n int) (lat []time.Duration, uss int64, rows []benchRow, err error) {
	h, err := tplSrv(ctx, env, "templates-cold", false, true)
	if err != nil {
		return nil, 0, nil, err
	}
	defer func() { err = errors.Join(err, stopSrv(h, "templates-cold", &rows)) }()
	ids, lat, err := firstResults(ctx, h, n)
	if err != nil {
		return nil, 0, rows, err
	}
	for _, id := range ids {
		if err := runWant(ctx, h.c, id, tplFrame, "499500"); err != nil {
			return nil, 0, rows, err
		}
	}
	uss, _, _ = kernelsUSS()
	return lat, uss / int64(n), rows, nil
}

// tplFirstResult: create -> first result on a drained pool, templates on, beside templates off; with
// the sandbox (not in quick mode), also beside templates on without spare boxes (pool.spare_boxes 0:
// each kernel's box made at its launch).
func tplFirstResult(ctx context.Context, env *benchEnv, n int, cold []time.Duration, spares bool) (rows []benchRow, err error) {
	lat, note, err := tplDrainedFirsts(ctx, env, "templates-first", n, &rows)
	if err != nil {
		return rows, err
	}
	if spares && benchSandboxOK() { // not in the smoke test: one more server
		bare, _, err := tplDrainedFirsts(ctx, env, "templates-first-nospare", n, &rows, func(c *configs.Config) { c.Pool.SpareBoxes = 0 })
		if err != nil {
			return rows, err
		}
		p50, b50 := percentile(lat, 50), percentile(bare, 50)
		rows = append(rows, benchRow{Name: "create -> first result, pool drained, templates + spare boxes (pool.spare_boxes 2)",
			Ours: fmtDur(p50) + " p50", Peer: fmtDur(b50) + " p50 (spare boxes off: each box made at launch)", Ratio: ratio(p50, b50),
			Note: fmt.Sprintf("%d sessions one after another, p99 %s vs %s", n, fmtDur(percentile(lat, 99)), fmtDur(percentile(bare, 99)))})
	}
	p50, c50 := percentile(lat, 50), percentile(cold, 50)
	verdict := "goal <= 50 ms p50: MET"
	if p50 > 50*time.Millisecond {
		verdict = "goal <= 50 ms p50: NOT met"
	}
	rows = append(rows, benchRow{Name: "create -> first result, numpy+pandas importable, pool drained (templates)",
		Ours: fmtDur(p50) + " p50", Peer: fmtDur(c50) + " p50 (templates off: cold start + imports)", Ratio: ratio(p50, c50),
		Note: fmt.Sprintf("%d sessions one after another, p99 %s; %s; %s", n, fmtDur(percentile(lat, 99)), note, verdict)})
	return rows, nil
}

// tplDrainedFirsts is n sessions' create -> first result on a drained pool with templates, after one
// that waits for the template to be warm; note is the server's sandbox note.
func tplDrainedFirsts(ctx context.Context, env *benchEnv, name string, n int, rows *[]benchRow, tweak ...func(*configs.Config)) (lat []time.Duration, note string, err error) {
	h, err := tplSrv(ctx, env, name, true, true, tweak...)
	if err != nil {
		return nil, "", err
	}
	defer func() { err = errors.Join(err, stopSrv(h, name, rows)) }()
	if _, _, err := firstResults(ctx, h, 1); err != nil { // waits for the template to be warm
		return nil, "", err
	}
	_, lat, err = firstResults(ctx, h, n)
	return lat, h.sandboxNote(), err
}

// tplBurst: n creates at once on the default pool with templates, each importing numpy+pandas and
// then making a frame; then the USS per idle session and the template's own cost.
func tplBurst(ctx context.Context, env *benchEnv, n int, cold time.Duration, coldUSS int64) (rows []benchRow, err error) {
	h, err := tplSrv(ctx, env, "templates-burst", true, false)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stopSrv(h, "templates-burst", &rows)) }()
	cpuBase, err := quietCPU(ctx, env, h)
	if err != nil {
		return nil, err
	}
	total, lat, err := burstCreates(ctx, h, n)
	if err != nil {
		return nil, err
	}
	if err := waitPoolFilled(ctx, h); err != nil { // its refill is not the sessions' cost
		return nil, err
	}
	cpuLive, err := selfCPUOver(ctx, idleWindow(env))
	if err != nil {
		return nil, err
	}
	rate, p50, p99 := float64(n)/total.Seconds(), percentile(lat, 50), percentile(lat, 99)
	met := "MET"
	if rate < 25 || p99 > 2*time.Second {
		met = "NOT met"
	}
	rows = append(rows, benchRow{Name: fmt.Sprintf("burst of %d creates at once, each `import numpy, pandas` then a frame cell (templates)", n),
		Ours: fmt.Sprintf("%.2f sessions/s", rate), Peer: fmtDur(cold) + " (one cold start + imports, p50)", Ratio: ratio(p50, cold) + " p50",
		Note: fmt.Sprintf("all in %s, create -> second result p50 %s p99 %s; goal >= 25/s, p99 <= 2 s: %s", fmtDur(total), fmtDur(p50), fmtDur(p99), met)})
	rows = append(rows, idleRow(n+2, 1, cpuLive, cpuBase, idleWindow(env), h.sandboxNote()))
	mem, per := tplMemoryRows(n, coldUSS, h.sandboxNote())
	watched, err := watchRow(ctx, h, per)
	if err != nil {
		return nil, err
	}
	return append(append(rows, mem...), watched), nil
}

// watchRow is what the node's memory watch counts per live session (GET /api/status:
// memory.kernel_bytes over capacity.live_kernels), beside the sessions' measured private memory
// (per, USS): what sizes the node's admission and hibernations. Near 1x: a session costs the node
// what it holds; RSS (the template's pages counted in every kernel) said ~6x.
func watchRow(ctx context.Context, h *benchSrv, per int64) (benchRow, error) {
	st, err := h.c.Status(ctx)
	if err != nil {
		return benchRow{}, err
	}
	live := int64(max(st.Capacity.LiveKernels, 1))
	counted := st.Memory.KernelBytes / live
	return benchRow{Name: "memory the node's watch counts per live session (templates)", Ours: fmtBytes(counted),
		Peer: fmtBytes(per) + " USS", Ratio: fmt.Sprintf("%.2fx", float64(counted)/float64(max(per, 1))),
		Note: fmt.Sprintf("memory.kernel_bytes %s over %d live kernels; it sizes hibernation under memory pressure; max_live_kernels %d (%s); %s",
			fmtBytes(st.Memory.KernelBytes), live, st.Capacity.MaxLiveKernels, st.Capacity.Source, h.sandboxNote())}, nil
}

// quietCPU is the server's CPU over a quiet window with one live session and its pool filled.
func quietCPU(ctx context.Context, env *benchEnv, h *benchSrv) (time.Duration, error) {
	if _, _, err := firstResults(ctx, h, 1); err != nil {
		return 0, err
	}
	if err := waitPoolFilled(ctx, h); err != nil {
		return 0, err
	}
	return selfCPUOver(ctx, idleWindow(env))
}

// burstCreates waits for a warm template (when there is one) and a filled pool, then creates n
// sessions at once, each importing numpy+pandas and then making a frame: the whole burst's time and
// each session's create -> second result.
func burstCreates(ctx context.Context, h *benchSrv, n int) (time.Duration, []time.Duration, error) {
	if _, _, err := firstResults(ctx, h, 1); err != nil {
		return 0, nil, err
	}
	if err := waitPoolFilled(ctx, h); err != nil {
		return 0, nil, err
	}
	lat := make([]time.Duration, n)
	start := time.Now()
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			t := time.Now()
			s, err := h.c.CreateSession(ctx, client.CreateRequest{})
			if err == nil {
				err = runWant(ctx, h.c, s.ID, tplImports, "4")
			}
			if err == nil {
				err = runWant(ctx, h.c, s.ID, tplFrame, "499500")
			}
			lat[i] = time.Since(t)
			return err
		})
	}
	err := g.Wait()
	return time.Since(start), lat, err
}

// tplBurstPair: the same smaller burst with templates on and off, one after the other in this run
// (100 cold data-science kernels at once would not fit a shared node).
func tplBurstPair(ctx context.Context, env *benchEnv, n int) (rows []benchRow, err error) {
	var rates [2]float64
	var p99s [2]time.Duration
	for i, on := range []bool{false, true} {
		name := fmt.Sprintf("templates-burst-%d-%v", n, on)
		h, err := tplSrv(ctx, env, name, on, false)
		if err != nil {
			return rows, err
		}
		total, lat, err := burstCreates(ctx, h, n)
		err = errors.Join(err, stopSrv(h, name, &rows))
		if err != nil {
			return rows, err
		}
		rates[i], p99s[i] = float64(n)/total.Seconds(), percentile(lat, 99)
	}
	return append(rows, benchRow{Name: fmt.Sprintf("burst of %d creates at once, same cells, templates on vs off", n),
		Ours: fmt.Sprintf("%.2f sessions/s", rates[1]), Peer: fmt.Sprintf("%.2f sessions/s (templates off)", rates[0]),
		Ratio: fmt.Sprintf("%.2fx rate", rates[1]/rates[0]), Note: fmt.Sprintf("p99 %s against %s", fmtDur(p99s[1]), fmtDur(p99s[0]))}), nil
}

// tplMemoryRows: USS per idle data-science session (the burst's, and the pool's idle kernels, all
// forked) beside a cold kernel's, and the template's own USS and RSS; and the USS per session.
func tplMemoryRows(n int, coldUSS int64, note string) ([]benchRow, int64) {
	time.Sleep(2 * time.Second) // the sessions' last checkpoints are done: idle
	uss, procs, tmpl := kernelsUSS()
	per := uss / int64(max(procs, 1))
	met := "MET"
	if per > 25<<20 {
		met = "NOT met"
	}
	rows := []benchRow{{Name: "private memory (USS) per idle data-science session (templates)", Ours: fmtBytes(per),
		Peer: fmtBytes(coldUSS) + " (templates off)", Ratio: fmt.Sprintf("%.2fx", float64(per)/float64(max(coldUSS, 1))),
		Note: fmt.Sprintf("smaps_rollup Private_Clean+Private_Dirty over %d kernel processes (%d sessions + the pool's idle ones), numpy+pandas and a 1,000-row frame each; %s; goal <= 25 MiB: %s", procs, n, note, met)}}
	for _, pid := range tmpl {
		tu, _ := procUSS(pid)
		rows = append(rows, benchRow{Name: "the template at rest (one per interpreter and pre-import set)",
			Ours: fmtBytes(tu) + " USS", Note: fmt.Sprintf("RSS %s; imports ipykernel, numpy, pandas once; runs no user code", fmtBytes(procRSS(pid)))})
	}
	return rows, per
}

// kernelsUSS sums the USS of this process's kernels (descendantKernels: forked ones and those in
// boxes included), and lists the kernel templates among this process's children.
func kernelsUSS() (uss int64, procs int, templates []int) {
	for _, pid := range descendantKernels() {
		if u, err := procUSS(pid); err == nil {
			uss += u
			procs++
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && templateOf(pid, os.Getpid()) {
			templates = append(templates, pid)
		}
	}
	return uss, procs, templates
}

// procUSS is pid's private memory: Private_Clean + Private_Dirty of /proc/PID/smaps_rollup.
func procUSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var kb int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		if k == "Private_Clean" || k == "Private_Dirty" {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			kb += n
		}
	}
	return kb << 10, sc.Err()
}

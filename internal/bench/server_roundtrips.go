package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel"
)

// The server section's round trips: `1+1` four ways in round-robin batches (POST /run, the
// websocket, raw kernel/ and Jupyter Server's websocket), each against its own kernel of the same
// interpreter. Set-up (rtRig), measure (rtMeasure over rtPaths), rows (rtRows).

// rtRig is what the round trips run against: a carryover server with a session for POST /run and
// one on a websocket, a raw kernel, and Jupyter Server.
type rtRig struct {
	h             *benchSrv
	postID        string
	ws            *coWS
	k             *kernel.Kernel
	jp            *jupyterPeer
	post, wsSplit turnSplit
	measuring     bool // the warm-up is not in the splits
}

// rtPath is one of the four ways, with its timings and this process's CPU time (server and client
// goroutines) over its batches.
type rtPath struct {
	name string
	one  func() (time.Duration, error)
	ds   []time.Duration
	cpu  time.Duration
}

func benchServerRoundTrips(ctx context.Context, env *benchEnv, python string) (rows []benchRow, err error) {
	runs, batch, warm := 300, 25, 30
	if env.Quick {
		runs, batch, warm = 8, 4, 2
	}
	r := &rtRig{}
	defer func() {
		if serr := r.close(&rows); err == nil && serr != nil {
			err = serr
		}
	}()
	if err := r.setUp(ctx, env, python); err != nil {
		return nil, err
	}
	paths := r.paths(ctx)
	if err := rtWarm(paths, warm); err != nil {
		return nil, err
	}
	r.measuring = true
	stopProfile, err := startServerProfile("rt", true)
	if err != nil {
		return nil, err
	}
	err = rtMeasure(paths, runs, batch)
	stopProfile()
	if err != nil {
		return nil, err
	}
	return r.rows(paths, batch), nil
}

// setUp starts the server and its two sessions, the raw kernel and Jupyter Server.
func (r *rtRig) setUp(ctx context.Context, env *benchEnv, python string) error {
	var err error
	if r.h, err = startBenchSrv(ctx, env, "rt", func(c *configs.Config) { c.Pool.Size = 2 }); err != nil {
		return err
	}
	if r.postID, _, err = r.h.createSession(ctx); err != nil {
		return err
	}
	wsID, _, err := r.h.createSession(ctx)
	if err != nil {
		return err
	}
	if r.ws, err = r.h.dialWS(ctx, wsID); err != nil {
		return err
	}
	// MPLBACKEND as the server's kernels have it.
	if r.k, err = rawKernel(ctx, env, python, map[string]string{"MPLBACKEND": "module://matplotlib_inline.backend_inline"}); err != nil {
		return err
	}
	r.jp, err = startJupyterPeer(ctx, env.Scratch, python)
	return err
}

// close stops what setUp started (in reverse), the server's logged errors going into rows.
func (r *rtRig) close(rows *[]benchRow) error {
	if r.jp != nil {
		r.jp.close()
	}
	if r.k != nil {
		_ = r.k.Shutdown(context.Background())
	}
	if r.ws != nil {
		r.ws.close()
	}
	if r.h == nil {
		return nil
	}
	return stopSrv(r.h, "round trips", rows)
}

// paths are the four ways to run `1+1`, each checking its answer.
func (r *rtRig) paths(ctx context.Context) []*rtPath {
	check := func(name string, a *client.RunResult) error {
		if a.Status != "ok" || a.Result == nil || *a.Result != "2" || a.Checkpoint == nil {
			return fmt.Errorf("%s 1+1: status %q result %v checkpoint %v %s", name, a.Status, a.Result, a.Checkpoint != nil, a.CheckpointError)
		}
		return nil
	}
	return []*rtPath{
		{name: "POST /run", one: func() (time.Duration, error) {
			d, a, err := r.h.run(ctx, r.postID, "1+1")
			if err == nil {
				err = check("POST /run", a)
			}
			if err == nil && r.measuring {
				r.post.add(d, a)
			}
			return d, err
		}},
		{name: "websocket", one: func() (time.Duration, error) {
			d, a, _, err := r.ws.run("1+1")
			if err == nil {
				err = check("websocket", a)
			}
			if err == nil && r.measuring {
				r.wsSplit.add(d, a)
			}
			return d, err
		}},
		{name: "raw kernel/", one: func() (time.Duration, error) { return r.rawRun(ctx) }},
		{name: "Jupyter Server", one: func() (time.Duration, error) {
			d, result, err := r.jp.execute("1+1")
			if err == nil && result != "2" {
				err = fmt.Errorf("jupyter_server 1+1: result %q", result)
			}
			return d, err
		}},
	}
}

// rawRun runs `1+1` on the raw kernel, decoding its outputs as the server does.
func (r *rtRig) rawRun(ctx context.Context) (time.Duration, error) {
	var result string
	xo := kernel.ExecOptions{StoreHistory: true, OnOutput: func(o kernel.Output) {
		if o.Type == "execute_result" {
			result = string(o.Data["text/plain"])
		}
	}}
	t0 := time.Now()
	res, err := r.k.Execute(ctx, "1+1", xo)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if res.Status != "ok" || result != `"2"` {
		return 0, fmt.Errorf("raw 1+1: status %s result %s", res.Status, result)
	}
	return d, nil
}

// rtWarm runs every path warm times, untimed.
func rtWarm(paths []*rtPath, warm int) error {
	for _, p := range paths {
		for range warm {
			if _, err := p.one(); err != nil {
				return fmt.Errorf("warm-up %s: %w", p.name, err)
			}
		}
	}
	return nil
}

// rtMeasure times the paths in batches, rotating which goes first.
func rtMeasure(paths []*rtPath, runs, batch int) error {
	for round := 0; round*batch < runs; round++ {
		for i := range paths {
			p := paths[(round+i)%len(paths)]
			c0 := procCPU()
			for range batch {
				d, err := p.one()
				if err != nil {
					return fmt.Errorf("%s: %w", p.name, err)
				}
				p.ds = append(p.ds, d)
			}
			p.cpu += procCPU() - c0
		}
	}
	return nil
}

// rows are the round trips' figures: POST /run and the websocket beside raw kernel/ (issue 13's
// targets: a median within 1.1x of the raw kernel, a p99 within 2x of our own median), and the
// websocket beside Jupyter Server's.
func (r *rtRig) rows(paths []*rtPath, batch int) []benchRow {
	cpuPer := func(p *rtPath) float64 { return float64(p.cpu) / float64(time.Millisecond) / float64(len(p.ds)) }
	r.post.cpuMS, r.wsSplit.cpuMS = cpuPer(paths[0]), cpuPer(paths[1])
	rawCPU := fmt.Sprintf(" (raw kernel/ path: %.2f ms/run)", cpuPer(paths[2]))
	post, wsd, raw, jup := paths[0].ds, paths[1].ds, paths[2].ds, paths[3].ds
	target := func(ours time.Duration) string {
		return verdict(float64(ours) <= 1.1*float64(srvMedian(raw)), "<= 1.1x raw kernel/")
	}
	tail := func(ds []time.Duration) string {
		return verdict(srvP99(ds) <= 2*srvMedian(ds), fmt.Sprintf("p99 <= 2x our median (%.1fx)", float64(srvP99(ds))/float64(srvMedian(ds))))
	}
	n := fmt.Sprintf("n=%d each, 4 paths round robin in batches of %d", len(post), batch)
	return []benchRow{
		{Name: "1+1 POST /run incl. checkpoint (median)", Ours: fmtDur(srvMedian(post)), Peer: fmtDur(srvMedian(raw)) + " raw",
			Ratio: ratio(srvMedian(post), srvMedian(raw)), Note: target(srvMedian(post)) + "; " + n + "; " + r.h.sandboxNote()},
		{Name: "1+1 POST /run incl. checkpoint (p99)", Ours: fmtDur(srvP99(post)), Peer: fmtDur(srvP99(raw)) + " raw",
			Ratio: ratio(srvP99(post), srvP99(raw)), Note: tail(post)},
		{Name: "  POST /run time split", Note: r.post.note() + rawCPU},
		{Name: "1+1 websocket incl. checkpoint (median)", Ours: fmtDur(srvMedian(wsd)), Peer: fmtDur(srvMedian(raw)) + " raw",
			Ratio: ratio(srvMedian(wsd), srvMedian(raw)), Note: target(srvMedian(wsd)) + "; until the run's status idle, sent after the result"},
		{Name: "1+1 websocket incl. checkpoint (p99)", Ours: fmtDur(srvP99(wsd)), Peer: fmtDur(srvP99(raw)) + " raw",
			Ratio: ratio(srvP99(wsd), srvP99(raw)), Note: tail(wsd)},
		{Name: "  websocket time split", Note: r.wsSplit.note()},
		{Name: "1+1 websocket vs Jupyter Server ws (median)", Ours: fmtDur(srvMedian(wsd)), Peer: fmtDur(srvMedian(jup)),
			Ratio: ratio(srvMedian(wsd), srvMedian(jup)), Note: fmt.Sprintf("Jupyter Server %s (token auth, loopback, JSON ws): %.1fx raw kernel/; "+
				"until execute_reply and iopub idle", r.jp.Version, float64(srvMedian(jup))/float64(srvMedian(raw)))},
		{Name: "1+1 websocket vs Jupyter Server ws (p99)", Ours: fmtDur(srvP99(wsd)), Peer: fmtDur(srvP99(jup)),
			Ratio: ratio(srvP99(wsd), srvP99(jup))},
	}
}

// rawKernel starts a kernel of python through kernel/ alone (the raw peer), with the config's
// transport and timings and env.
func rawKernel(ctx context.Context, env *benchEnv, python string, kenv map[string]string) (*kernel.Kernel, error) {
	spec, err := kernel.FindSpec("python", python)
	if err != nil {
		return nil, err
	}
	k, err := kernel.Start(ctx, kernel.Options{
		Spec: spec, Transport: env.Cfg.Kernel.Transport, WorkDir: env.Scratch,
		StartupTimeout:    max(configs.Seconds(env.Cfg.Kernel.StartupTimeoutSeconds), benchStartupTimeout),
		ShutdownGrace:     configs.Seconds(env.Cfg.Kernel.ShutdownGraceSeconds),
		HeartbeatInterval: time.Duration(env.Cfg.Kernel.HeartbeatIntervalMS) * time.Millisecond,
		Env:               kenv,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, fmt.Errorf("raw kernel: %w", err)
	}
	return k, nil
}

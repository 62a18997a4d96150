package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// The server section measures the product surface in one run: `1+1` through POST /run and the
// websocket (each turn checkpointed, as always) beside raw kernel/ and beside Debian's Jupyter Server
// websocket, interleaved; session create -> first result with the warm pool beside pool.size=0; and
// many concurrent sessions, checking every output arrives.

func benchServerSection(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	python := env.python()
	defer func() {
		// Every kernel this section started must be gone: carryover's (children of this process) and
		// Jupyter Server's (their connection files are under the scratch dir).
		var left []int
		for range 50 {
			if left = benchKernelProcs(env.Scratch); len(left) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		v := "OK"
		if len(left) > 0 {
			v = "LEAK"
			if err == nil {
				err = fmt.Errorf("%d kernel processes left running: %v", len(left), left)
			}
		}
		rows = append(rows, benchRow{Name: "kernel processes left after shutdown", Ours: fmt.Sprint(len(left)), Ratio: v,
			Note: "ipykernel processes that are children of this process or of the Jupyter peer, after every server stopped"})
	}()

	r, err := benchServerRoundTrips(ctx, env, python)
	rows = append(rows, r...)
	if err != nil {
		return rows, fmt.Errorf("round trips: %w", err)
	}
	r, err = benchServerFirstResult(ctx, env)
	rows = append(rows, r...)
	if err != nil {
		return rows, fmt.Errorf("create -> first result: %w", err)
	}
	r, err = benchServerConcurrent(ctx, env)
	rows = append(rows, r...)
	if err != nil {
		return rows, fmt.Errorf("concurrent sessions: %w", err)
	}
	return rows, nil
}

// stopSrv stops h and turns logged server errors into a row (none expected).
func stopSrv(h *benchSrv, name string, rows *[]benchRow) error {
	errLines, err := h.stop()
	if len(errLines) > 0 {
		*rows = append(*rows, benchRow{Name: "  server errors logged (" + name + ")", Ours: fmt.Sprint(len(errLines)),
			Ratio: "CHECK", Note: benchClip(errLines[0], 300)})
	}
	return err
}

func srvMedian(ds []time.Duration) time.Duration {
	return percentile(append([]time.Duration(nil), ds...), 50)
}

func srvP99(ds []time.Duration) time.Duration {
	return percentile(append([]time.Duration(nil), ds...), 99)
}

func srvMedianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

// turnSplit accumulates, per turn, what the server reports of its own time: the kernel execute and
// the checkpoint (with the agent's detect/serialize/write and the Go side's files), the rest of the
// client-measured wall time being HTTP/websocket, JSON and the SQLite records of the turn.
type turnSplit struct {
	wall, exec, ckpt, detect, serialize, write, files []float64
	cpuMS                                             float64 // mean CPU time of this process per turn
}

func (s *turnSplit) add(wall time.Duration, a *client.RunResult) {
	s.wall = append(s.wall, float64(wall)/float64(time.Millisecond))
	s.exec = append(s.exec, a.DurationMS)
	if c := a.Checkpoint; c != nil {
		s.ckpt = append(s.ckpt, c.DurationMS)
		s.detect = append(s.detect, c.Timings.DetectMS)
		s.serialize = append(s.serialize, c.Timings.SerializeMS)
		s.write = append(s.write, c.Timings.WriteMS)
		s.files = append(s.files, c.Timings.FilesMS)
	}
}

func (s *turnSplit) note() string {
	w, e, c := srvMedianF(s.wall), srvMedianF(s.exec), srvMedianF(s.ckpt)
	d, sz, wr, f := srvMedianF(s.detect), srvMedianF(s.serialize), srvMedianF(s.write), srvMedianF(s.files)
	// The snapshot rides on the cell's execute_request, so the agent's detect and serialize are inside
	// "kernel execute"; the rest of the checkpoint is the Go side's commit.
	commit := c - d - sz
	return fmt.Sprintf("medians: kernel execute incl. the snapshot riding on it %.2f (agent detect %.2f, serialize %.2f) + "+
		"commit %.2f (spool + store write %.2f, files %.2f) + HTTP/ws, JSON, session/execution records %.2f = %.2f ms; "+
		"Go CPU %.2f ms/turn (server + client, mean)", e, d, sz, commit, wr, f, w-e-commit, w, s.cpuMS)
}

// benchServerFirstResult times POST /api/sessions then POST /run `1+1` on fresh sessions: with the
// warm pool (pool.size=2, time left between for the refill) and, as the peer, with pool.size=0 (the
// kernel spawns and gets the agent inside the first run).
func benchServerFirstResult(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	nWarm, nCold := 10, 5
	if env.Quick {
		nWarm, nCold = 1, 1
	}
	sbNote := ""
	measure := func(name string, pool, n int) (tot, create, run []time.Duration, err error) {
		h, err := startBenchSrv(ctx, env, name, func(c *configs.Config) {
			c.Pool.Size = pool
			if pool == 0 {
				c.Pool.MaxSize = 0 // else the adaptive pool grows at the first cold claim, and the rest find a warm kernel
			}
		})
		if err != nil {
			return nil, nil, nil, err
		}
		sbNote = h.sandboxNote()
		defer func() {
			if serr := stopSrv(h, name, &rows); err == nil && serr != nil {
				err = serr
			}
		}()
		for i := range n + 1 { // the first one warms the server's code paths and is not counted
			// Let the pool fill (a kernel start plus the agent: ~0.5 s each, one at a time).
			h.settle(time.Duration(max(pool, 1)) * 1500 * time.Millisecond)
			t0 := time.Now()
			id, dc, err := h.createSession(ctx)
			if err != nil {
				return nil, nil, nil, err
			}
			dr, a, err := h.run(ctx, id, "1+1")
			d := time.Since(t0)
			if err != nil {
				return nil, nil, nil, err
			}
			if a.Status != "ok" || a.Result == nil || *a.Result != "2" {
				return nil, nil, nil, fmt.Errorf("first run: status %q result %v", a.Status, a.Result)
			}
			if err := h.c.DeleteSession(ctx, id); err != nil {
				return nil, nil, nil, err
			}
			if i > 0 {
				tot, create, run = append(tot, d), append(create, dc), append(run, dr)
			}
		}
		return tot, create, run, nil
	}
	warm, wc, wr, err := measure("warm", 2, nWarm)
	if err != nil {
		return rows, err
	}
	cold, _, _, err := measure("cold", 0, nCold)
	if err != nil {
		return rows, err
	}
	rows = append(rows,
		benchRow{Name: "session create -> first result, warm pool (median)", Ours: fmtDur(srvMedian(warm)),
			Peer: fmtDur(srvMedian(cold)) + " cold", Ratio: ratio(srvMedian(warm), srvMedian(cold)),
			Note: fmt.Sprintf("%s; n=%d/%d; create %s + first run %s (incl. checkpoint); peer: pool.size=0, the kernel spawns in the run; %s",
				verdict(srvMedian(warm) <= 10*time.Millisecond, "<= 10 ms (issue 13)"), len(warm), len(cold), fmtDur(srvMedian(wc)), fmtDur(srvMedian(wr)), sbNote)},
		benchRow{Name: "session create -> first result, warm pool (max)", Ours: fmtDur(slices.Max(warm)), Peer: fmtDur(slices.Max(cold)) + " cold",
			Ratio: ratio(slices.Max(warm), slices.Max(cold))},
	)
	return rows, nil
}

func firstErrOf(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

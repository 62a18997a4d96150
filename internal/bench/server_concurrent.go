package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// The server section's load: many sessions at once, each a series of runs printing a line of its
// own, half over POST /run and half over a websocket, every answer checked to hold exactly its line.
// Set-up (concSetUp), measure (concMeasure, one concSession per session), rows (concRows).

// concTally is what the sessions' runs saw.
type concTally struct {
	lats                         []time.Duration
	lost, failed, split, foreign int
	example, foreignEx           string // the first wrong answer; the first with foreign text
	err                          error  // the first run that failed
}

// merge adds o into t.
func (t *concTally) merge(o *concTally) {
	t.lats = append(t.lats, o.lats...)
	t.lost += o.lost
	t.failed += o.failed
	t.split += o.split
	t.foreign += o.foreign
	t.foreignEx = orElse(t.foreignEx, o.foreignEx)
	t.example = orElse(t.example, o.example)
	t.err = firstErrOf(t.err, o.err)
}

// orElse is a unless it is empty, else b.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func benchServerConcurrent(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	nSess, nRuns, warmPar := 50, 100, 4
	if env.Quick {
		nSess, nRuns = 4, 3
	}
	h, err := startBenchSrv(ctx, env, "load", func(c *configs.Config) { c.Pool.Size = 2 })
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stopSrv(h, "load", &rows); err == nil && serr != nil {
			err = serr
		}
	}()
	ids, warmDur, err := concSetUp(ctx, h, nSess, warmPar)
	if err != nil {
		return nil, err
	}
	tally, wall, err := concMeasure(ctx, h, ids, nRuns)
	if err != nil {
		return nil, err
	}
	recorded, err := concRecorded(ctx, h, ids)
	if err != nil {
		return nil, err
	}
	rows = concRows(h, tally, nSess, nRuns, recorded, wall, warmPar, warmDur)
	if tally.err != nil {
		return rows, tally.err
	}
	if tally.lost > 0 || tally.failed > 0 || recorded != nSess*nRuns {
		return rows, errors.New("outputs lost under concurrent load")
	}
	return rows, nil
}

// concSetUp creates n sessions and starts every session's kernel first (par at a time): the load is
// about runs, not spawns. It returns the sessions and how long their start took.
func concSetUp(ctx context.Context, h *benchSrv, n, par int) ([]string, time.Duration, error) {
	ids := make([]string, n)
	for i := range ids {
		var err error
		if ids[i], _, err = h.createSession(ctx); err != nil {
			return nil, 0, err
		}
	}
	t0 := time.Now()
	var g errgroup.Group
	g.SetLimit(par)
	for _, id := range ids {
		g.Go(func() error {
			_, _, err := h.run(ctx, id, "pass")
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, fmt.Errorf("starting sessions: %w", err)
	}
	return ids, time.Since(t0), nil
}

// concMeasure runs every session's nRuns at once (odd sessions over a websocket), from one start.
func concMeasure(ctx context.Context, h *benchSrv, ids []string, nRuns int) (*concTally, time.Duration, error) {
	var mu sync.Mutex
	total := &concTally{}
	start := make(chan struct{})
	var g errgroup.Group
	for si, id := range ids {
		var ws *coWS
		if si%2 == 1 {
			var err error
			if ws, err = h.dialWS(ctx, id); err != nil {
				close(start)
				_ = g.Wait()
				return nil, 0, err
			}
		}
		g.Go(func() error {
			<-start
			mine := concSession(ctx, h, ws, id, nRuns)
			mu.Lock()
			total.merge(mine)
			mu.Unlock()
			return nil // counted in the tally
		})
	}
	stopProfile, err := startServerProfile("load", false)
	if err != nil {
		close(start)
		_ = g.Wait()
		return nil, 0, err
	}
	t0 := time.Now()
	close(start)
	_ = g.Wait()
	wall := time.Since(t0)
	stopProfile()
	return total, wall, nil
}

// concSession runs one session's runs (over ws when not nil, which it closes) and checks each
// answer holds exactly its line.
func concSession(ctx context.Context, h *benchSrv, ws *coWS, id string, nRuns int) *concTally {
	if ws != nil {
		defer ws.close()
	}
	t := &concTally{lats: make([]time.Duration, 0, nRuns)}
	for i := range nRuns {
		line := fmt.Sprintf("%s:%d", id, i)
		d, a, streams, err := concRun(ctx, h, ws, id, fmt.Sprintf("print(%q)", line))
		if err != nil {
			t.failed++
			t.err = firstErrOf(t.err, err)
			if ws != nil {
				break // the connection is gone
			}
			continue
		}
		t.lats = append(t.lats, d)
		t.check(line, a, streams)
	}
	return t
}

// concRun runs code once over ws (or POST /run when nil) and returns the answer's stream texts.
func concRun(ctx context.Context, h *benchSrv, ws *coWS, id, code string) (time.Duration, *client.RunResult, []string, error) {
	if ws != nil {
		return ws.run(code)
	}
	d, a, err := h.run(ctx, id, code)
	var streams []string
	if err == nil {
		for _, o := range a.Outputs {
			if o.Type == "stream" {
				streams = append(streams, o.Text)
			}
		}
	}
	return d, a, streams, err
}

// check counts an answer that lacks line (lost) or holds more than it (foreign). The kernel may
// send one print as several stream messages (text, then "\n", when its flush timer falls in
// between); consecutive stream outputs join, as in any frontend.
func (t *concTally) check(line string, a *client.RunResult, streams []string) {
	want := line + "\n"
	if len(streams) > 1 {
		t.split++
	}
	got := strings.Join(streams, "")
	switch {
	case a.Status == "ok" && a.Stdout == want && got == want:
	case a.Status != "ok" || !strings.Contains(a.Stdout, want) || !strings.Contains(got, want):
		t.lost++
		if t.example == "" {
			t.example = fmt.Sprintf("LOST %s: status %s stdout %q streams %q", line, a.Status, a.Stdout, streams)
		}
	default: // the line is there, with text that is not this run's
		t.foreign++
		if t.foreignEx == "" {
			t.foreignEx = fmt.Sprintf("%s: stdout %q", line, a.Stdout)
		}
	}
}

// concRecorded counts the runs recorded as executions, less the start-up runs.
func concRecorded(ctx context.Context, h *benchSrv, ids []string) (int, error) {
	recorded := 0
	for _, id := range ids {
		execs, err := h.c.Executions(ctx, id, 1000)
		if err != nil {
			return 0, err
		}
		for _, e := range execs {
			if e.Kind == "run" && e.Status == "ok" {
				recorded++
			}
		}
	}
	return recorded - len(ids), nil
}

// concRows are the load's figures: throughput, the p99 latency, outputs lost, foreign output.
func concRows(h *benchSrv, t *concTally, nSess, nRuns, recorded int, wall time.Duration, warmPar int, warmDur time.Duration) []benchRow {
	total := nSess * nRuns
	label := fmt.Sprintf("%d sessions x %d runs", nSess, nRuns)
	rows := []benchRow{
		{Name: label + ": throughput", Ours: fmt.Sprintf("%.0f runs/s", float64(len(t.lats))/wall.Seconds()),
			Note: fmt.Sprintf("%d runs in %s, all sessions at once, every run checkpointed; half POST /run, half websocket; "+
				"kernels started beforehand (%d at a time: %s); %s", len(t.lats), wall.Round(time.Millisecond), warmPar,
				warmDur.Round(time.Millisecond), h.sandboxNote())},
		{Name: label + ": latency (p99)", Ours: fmtDur(srvP99(t.lats)), Note: "median " + fmtDur(srvMedian(t.lats))},
		{Name: label + ": outputs lost", Ours: fmt.Sprint(t.lost + t.failed), Ratio: verdict(t.lost+t.failed == 0 && recorded == total, "0 lost"),
			Note: fmt.Sprintf("each answer must hold its own line (stdout, stream outputs / ws output frames): %d missing, %d runs failed; "+
				"executions recorded %d/%d; %d lines came as 2+ stream messages (joined, as frontends do)", t.lost, t.failed, recorded, total, t.split)},
		{Name: label + ": answers with foreign output", Ours: fmt.Sprint(t.foreign), Ratio: verdict(t.foreign == 0, "0"),
			Note: "the line is there, plus text the run did not print" + map[bool]string{true: "; first: " + benchClip(t.foreignEx, 260), false: ""}[t.foreignEx != ""]},
	}
	if t.example != "" {
		rows = append(rows, benchRow{Name: "  first wrong answer", Note: benchClip(t.example, 300)})
	}
	return rows
}

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// The replay section restores a checkpoint whose skipped values replay rebuilds, into a fresh
// kernel with replay on and off: what replay adds should be what the replayed cells cost when they
// ran live, nothing more. Two notebooks: the torch example of issue 28 (output and loss inside an
// autograd graph) and one whose generator is made by a cell that takes 1 s.

var replayNotebooks = []struct {
	name  string
	cells []string
}{
	{"torch notebook (output, loss rebuilt)", []string{
		"import torch, torch.nn as nn, torch.optim as optim\ntorch.manual_seed(0)",
		"layer = nn.Linear(2, 1); input_data = torch.tensor([[1.0, 2.0]])\noutput = layer(input_data)",
		"target = torch.tensor([[1.0]]); loss_fn = nn.MSELoss()\nloss = loss_fn(output, target)",
	}},
	{"generator made by a 1 s cell", []string{
		"import time\ntime.sleep(1)\ngen = (i * i for i in range(10))",
		"a = next(gen)",
	}},
}

func benchReplay(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	spec, err := kernel.FindSpec("python", "/usr/bin/python3")
	if err != nil {
		return nil, err
	}
	var rows []benchRow
	for i, nb := range replayNotebooks {
		row, err := replayRow(ctx, env, spec, fmt.Sprintf("replay%d", i), nb.name, nb.cells)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", nb.name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func replayRow(ctx context.Context, env *benchEnv, spec *kernel.Spec, id, name string, cells []string) (benchRow, error) {
	dir, ws, st, err := benchStore(ctx, env, id, "replay.sqlite", "bench")
	if err != nil {
		return benchRow{}, err
	}
	defer st.Close()
	on := &persistence.Checkpointer{Store: st}
	off := &persistence.Checkpointer{Store: st, Replay: persistence.ReplayOptions{Off: true}}
	b := &ckptBench{ctx: ctx, cp: on, spec: spec, ws: ws}
	if b.k, err = b.start(filepath.Join(dir, "spool0")); err != nil {
		return benchRow{}, err
	}
	liveOf := make([]time.Duration, len(cells)) // each cell's own time, live
	for i, c := range cells {
		t := time.Now()
		if err := b.run(c); err != nil {
			_ = b.k.Shutdown(context.Background())
			return benchRow{}, err
		}
		liveOf[i] = time.Since(t)
		if _, _, err := b.checkpoint(""); err != nil {
			_ = b.k.Shutdown(context.Background())
			return benchRow{}, err
		}
	}
	_ = b.k.Shutdown(context.Background())
	// Off and on alternate, three times each (a kernel's first torch import varies by hundreds of
	// ms on this machine): medians.
	var runs [2][]time.Duration
	var res *carryover.RestoreResult
	reps := 3
	if env.Quick {
		reps = 1
	}
	for rep := 0; rep < reps; rep++ {
		for i, c := range []*persistence.Checkpointer{off, on} {
			rb := &ckptBench{ctx: ctx, cp: c, spec: spec, ws: ws}
			k, err := rb.start(filepath.Join(dir, fmt.Sprintf("spool%d-%d", rep, i)))
			if err != nil {
				return benchRow{}, err
			}
			t := time.Now()
			rr, err := c.Restore(ctx, k, "bench", "", ws, false)
			runs[i] = append(runs[i], time.Since(t))
			_ = k.Shutdown(context.Background())
			if err != nil {
				return benchRow{}, err
			}
			if i == 1 {
				res = rr
			}
		}
	}
	took := [2]time.Duration{percentile(runs[0], 50), percentile(runs[1], 50)}
	if len(res.Recomputed) == 0 {
		return benchRow{}, fmt.Errorf("nothing recomputed: %+v", res.NotReplayed)
	}
	// The floor: the live time of the turns replayed (history turns count the cells from 1).
	live, replayed := time.Duration(0), map[int]bool{}
	for _, r := range res.Recomputed {
		for _, t := range r.Turns {
			if !replayed[t] && t >= 1 && t <= len(liveOf) {
				replayed[t] = true
				live += liveOf[t-1]
			}
		}
	}
	// Ours: the replay's own time in the agent (plan, copies, the cells, verification), exact; the
	// end-to-end restores beside it swing by the torch import's noise (hundreds of ms), so they are
	// in the note.
	replay := time.Duration(res.Recomputed[0].MS * float64(time.Millisecond))
	return benchRow{Name: "restore with replay, " + name, Ours: fmtDur(replay) + " replay",
		Peer:  fmt.Sprintf("%s (those cells, live)", fmtDur(live)),
		Ratio: fmt.Sprintf("%.2fx", replay.Seconds()/live.Seconds()),
		Note: fmt.Sprintf("whole restore (median of 3): %s with replay, %s without; rebuilt %s by replaying turns %v",
			fmtDur(took[1]), fmtDur(took[0]), res.Recomputed[0].Name, res.Recomputed[0].Turns)}, nil
}

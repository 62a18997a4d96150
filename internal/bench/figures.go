package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// The figures section measures turns beside a live seaborn figure of the Kaggle "data exploration"
// kind (a boxplot per building year on f, ax = plt.subplots(figsize=(16, 8))): a turn that does not
// touch it (it displays a frame) and a turn that changes it (set_title), each beside pickle.dumps
// of the figure in the same kernel.

const figureCells = `import matplotlib
matplotlib.use("Agg")
import numpy as np, pandas as pd, matplotlib.pyplot as plt, seaborn as sns
rng = np.random.default_rng(0)
n = 3000
df_train = pd.DataFrame({"YearBuilt": rng.integers(1880, 2010, n), "SalePrice": rng.normal(180000, 40000, n),
                         "GrLivArea": rng.normal(1500, 400, n), "Neighborhood": rng.choice(["NAmes", "OldTown", "Edwards"], n)})
f, ax = plt.subplots(figsize=(16, 8))
fig = sns.boxplot(x="YearBuilt", y="SalePrice", data=df_train)
fig.axis(ymin=0, ymax=800000)
plt.xticks(rotation=90)
f.canvas.draw()`

// figurePickleMS is pickle.dumps of the figure (the names that hold it, together), in the kernel.
const figurePickleMS = `(lambda p, t: (lambda t0: (p.dumps((f, ax, fig), protocol=5), (t.perf_counter() - t0) * 1e3)[1])(t.perf_counter()))(__import__("pickle"), __import__("time"))`

func benchFigures(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	spec, err := kernel.FindSpec("python", "/usr/bin/python3")
	if err != nil {
		return nil, err
	}
	dir, ws, st, err := benchStore(ctx, env, "figures", "figures.sqlite", "bench")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	b := &ckptBench{ctx: ctx, cp: &persistence.Checkpointer{Store: st}, spec: spec, ws: ws}
	if b.k, err = b.start(filepath.Join(dir, "spool")); err != nil {
		return nil, err
	}
	defer func() { _ = b.k.Shutdown(context.Background()) }()
	cells := figureCells
	if env.Quick { // a boxplot of 10 years, not 130: the same code paths
		cells = strings.NewReplacer("n = 3000", "n = 300", "rng.integers(1880, 2010, n)", "rng.integers(1880, 1890, n)").Replace(cells)
	}
	first, _, err := b.checkpoint(cells)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(first.Saved, "f") {
		return nil, fmt.Errorf("the figure was not saved: %v", first.Saved)
	}
	reps := 7
	if env.Quick {
		reps = 1
	}
	measure := func(code func(i int) string, changed bool) (time.Duration, time.Duration, *carryover.CheckpointResult, error) {
		var ours, peer []time.Duration
		var last *carryover.CheckpointResult
		for i := 0; i < reps; i++ {
			r, d, err := b.checkpoint(code(i))
			if err != nil {
				return 0, 0, nil, err
			}
			if slices.Contains(r.Saved, "f") != changed {
				return 0, 0, nil, fmt.Errorf("%q: the figure saved: %v, want %v", code(i), r.Saved, changed)
			}
			out, err := b.k.Eval(b.ctx, "", figurePickleMS)
			if err != nil {
				return 0, 0, nil, err
			}
			ms, err := strconv.ParseFloat(out, 64)
			if err != nil {
				return 0, 0, nil, fmt.Errorf("pickle.dumps time %q: %w", out, err)
			}
			ours, peer, last = append(ours, d), append(peer, time.Duration(ms*float64(time.Millisecond))), r
		}
		return percentile(ours, 50), percentile(peer, 50), last, nil
	}
	var rows []benchRow
	u, p, r, err := measure(func(int) string { return "df_train.describe()" }, false)
	if err != nil {
		return nil, err
	}
	rows = append(rows, benchRow{Name: "turn not touching a live seaborn figure (median)", Ours: fmtDur(u), Peer: fmtDur(p) + " (pickle.dumps of the figure)",
		Ratio: fmt.Sprintf("%s; %s", ratio(u, p), verdict(u <= 20*time.Millisecond, "<= 20 ms")),
		Note:  fmt.Sprintf("n=%d; the figure's first save wrote %s; %s", reps, fmtBytes(first.BytesWritten), ckptNote(r, ""))})
	c, p, r, err := measure(func(i int) string { return fmt.Sprintf("ax.set_title('year %d')", i) }, true)
	if err != nil {
		return rows, err
	}
	rows = append(rows, benchRow{Name: "turn changing the figure (set_title, median)", Ours: fmtDur(c), Peer: fmtDur(p) + " (pickle.dumps of the figure)",
		Ratio: fmt.Sprintf("%s; %s", ratio(c, p), verdict(c <= p, "<= pickle.dumps")), Note: fmt.Sprintf("n=%d; %s", reps, ckptNote(r, ""))})
	return rows, nil
}

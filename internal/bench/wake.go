package bench

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// The wake section restores a typical data-science namespace (numpy, pandas, matplotlib imported,
// ~10 MB of data, a figure) into a fresh kernel twice: a cold one, and a warm one that imported
// persistence.pre_import (the configured default: numpy, pandas, matplotlib.pyplot) before the wake,
// as a pooled kernel has. The floor is the plain read of the same chunks, which the restore reports as read_ms.

const wakeCells = `import numpy as np, pandas as pd, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rng = np.random.default_rng(0)
X = rng.random((200_000, 5))
df = pd.DataFrame(X, columns=list("abcde")); df["k"] = (df.a * 10).astype(int).astype(str)
summary = df.groupby("k").mean()
fig, ax = plt.subplots(); ax.plot(summary.a.values)
`

func benchWake(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	spec, err := kernel.FindSpec("python", "/usr/bin/python3")
	if err != nil {
		return nil, err
	}
	dir, ws, st, err := benchStore(ctx, env, "wake", "wake.sqlite", "w")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	cold := &persistence.Checkpointer{Store: st}
	warm := &persistence.Checkpointer{Store: st, PreImport: env.Cfg.Persistence.PreImport}
	b := &ckptBench{ctx: ctx, cp: cold, spec: spec, ws: ws, spool: filepath.Join(dir, "spool0")}
	if b.k, err = b.start(b.spool); err != nil {
		return nil, err
	}
	defer func() { _ = b.k.Shutdown(context.Background()) }()
	if err := b.run(wakeCells); err != nil {
		return nil, err
	}
	r, err := cold.Checkpoint(ctx, b.k, "w", 1, "")
	if err != nil {
		return nil, err
	}
	var rows []benchRow
	for i, c := range []*persistence.Checkpointer{cold, warm} {
		name := []string{"wake, data-science namespace, cold kernel", "wake, data-science namespace, pre-imported kernel"}[i]
		wb := &ckptBench{ctx: ctx, cp: c, spec: spec, ws: ws}
		k, err := wb.start(filepath.Join(dir, fmt.Sprintf("spool%d", i+1)))
		if err != nil {
			return rows, err
		}
		// The pool warms a kernel before it can be claimed: outside the timed wake.
		if err := c.Warm(ctx, k); err != nil {
			_ = k.Shutdown(context.Background())
			return rows, err
		}
		t := time.Now()
		rr, err := c.Restore(ctx, k, "w", "", ws, false)
		d := time.Since(t)
		_ = k.Shutdown(context.Background())
		if err != nil {
			return rows, err
		}
		if len(rr.Failed) > 0 {
			return rows, fmt.Errorf("wake failed: %+v", rr.Failed)
		}
		rows = append(rows, benchRow{Name: name, Ours: fmtDur(d), Peer: fmt.Sprintf("%.1f ms (chunk read)", rr.Timings.ReadMS),
			Ratio: verdict(d <= 300*time.Millisecond, "<=300 ms"),
			Note:  fmt.Sprintf("%s saved; load %.1f ms; slowest groups: %s", fmtBytes(r.BytesWritten), rr.Timings.LoadMS, slowestGroups(rr.Groups, 3))})
	}
	return rows, nil
}

// slowestGroups names the n groups whose load took longest, with their times: where a wake goes.
func slowestGroups(gs []carryover.GroupTiming, n int) string {
	gs = slices.Clone(gs)
	slices.SortFunc(gs, func(a, b carryover.GroupTiming) int { return cmp.Compare(b.MS, a.MS) })
	var parts []string
	for _, g := range gs[:min(n, len(gs))] {
		parts = append(parts, fmt.Sprintf("%s %.1f ms", strings.Join(g.Names, ","), g.MS))
	}
	return strings.Join(parts, ", ")
}

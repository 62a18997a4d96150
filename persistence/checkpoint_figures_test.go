package persistence_test

import (
	"context"
	"slices"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// figureTurn runs code as a session turn does (the snapshot riding on the cell's execute_request,
// committed by Finish) and returns the checkpoint's report.
func figureTurn(t *testing.T, c *persistence.Checkpointer, k *kernel.Kernel, id string, turn int, code string) *carryover.CheckpointResult {
	t.Helper()
	ctx := context.Background()
	p, err := c.Prepare(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Execute(ctx, code, kernel.ExecOptions{UserExpressions: map[string]string{"snap": p.Expr}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "ok" {
		t.Fatalf("turn %d %q: %s: %s", turn, code, res.EName, res.EValue)
	}
	answer, err := kernel.UserExpressionText(res.UserExpressions["snap"])
	if err != nil {
		t.Fatal(err)
	}
	cp, err := c.Finish(ctx, k, p, turn, "", answer)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

const figureSetup = `import io
import matplotlib.pyplot as plt, numpy as np, pandas as pd, seaborn as sns
df = pd.DataFrame({"a": np.arange(300.0), "b": np.sin(np.arange(300.0) / 20), "k": ["x", "y", "z"] * 100})
f, ax = plt.subplots(figsize=(6, 4))
sns.lineplot(data=df, x="a", y="b", hue="k", ax=ax)
ax.plot([0, 1, 2], [5, 6, 7], label="mine")
f.canvas.draw()`

// The turns that change the figure without naming it (pyplot's current figure): only the figure
// detector can see them. Each leaves something restoreFigure reads back.
var figureChanges = []string{
	`plt.title("changed title")`,
	`plt.plot([0, 1, 2], [1, 2, 3], label="new line")`,
	`plt.xlim(-5, 50)`,
	`[l for l in plt.gca().lines if l.get_label() == "mine"][0].set_ydata([9, 9, 9])`,
}

const (
	figureProbe = `(ax.get_title(), [l.get_label() for l in ax.lines][-2:], tuple(float(v) for v in ax.get_xlim()), ` +
		`[float(v) for l in ax.lines if l.get_label() == "mine" for v in l.get_ydata()], ax.figure is f)`
	figureChanged  = `('changed title', ['mine', 'new line'], (-5.0, 50.0), [9.0, 9.0, 9.0], True)`
	figureDetector = `import sys; sys.modules["carryover_agent.figures"].ENABLED = False`
)

// TestLiveFigures: a live seaborn/matplotlib figure drawn, then left alone for turns that display
// data, compute and even draw it again (savefig), is not serialised again (the checkpoint names it
// in neither saved nor written bytes); a change through pyplot that names neither f nor ax (a
// title, a new line, xlim, a line's data) is saved and comes back after kill -9, and a change to
// the restored figure is seen too. With the detector switched off the same changes go unsaved:
// the assertions see what it catches.
func TestLiveFigures(t *testing.T) {
	t.Parallel()
	for _, detect := range []bool{true, false} {
		name := map[bool]string{true: "detector on", false: "detector off"}[detect]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, ws, spool := kernelSession(t, "fig")
			k := agentKernel(t, c, ws, spool)
			if !detect {
				if _, err := k.Eval(ctx, figureDetector, ""); err != nil {
					t.Fatal(err)
				}
			}
			turn := 0
			next := func(k *kernel.Kernel, code string) *carryover.CheckpointResult {
				turn++
				return figureTurn(t, c, k, "fig", turn, code)
			}
			first := next(k, figureSetup)
			if !slices.Contains(first.Saved, "f") || !slices.Contains(first.Saved, "ax") {
				t.Fatalf("the figure was not saved: %+v", first.Saved)
			}
			for _, code := range []string{"df.describe()", "total = float(df.b.sum())",
				`buf = io.BytesIO(); plt.savefig(buf, format="png"); png = len(buf.getvalue()); del buf`, "df.head()"} {
				cp := next(k, code)
				if slices.Contains(cp.Saved, "f") || slices.Contains(cp.Saved, "ax") || cp.BytesWritten >= first.BytesWritten/4 {
					t.Fatalf("%q left the figure alone but the checkpoint saved %v, %d bytes (the figure's turn: %d)",
						code, cp.Saved, cp.BytesWritten, first.BytesWritten)
				}
			}
			for _, code := range figureChanges {
				cp := next(k, code)
				if saved := slices.Contains(cp.Saved, "f") && slices.Contains(cp.Saved, "ax"); saved != detect {
					t.Fatalf("%q changed the figure: saved %v (detector on: %v)", code, cp.Saved, detect)
				}
			}
			if live := eval(t, k, figureProbe); live != figureChanged {
				t.Fatalf("the live figure reads %s", live)
			}
			killKernel(t, k)
			k2 := agentKernel(t, c, ws, spool)
			if _, err := c.Restore(ctx, k2, "fig", "", "", false); err != nil {
				t.Fatal(err)
			}
			got := eval(t, k2, figureProbe)
			if (got == figureChanged) != detect {
				t.Fatalf("restored figure %s, the live one was %s (detector on: %v)", got, figureChanged, detect)
			}
			if !detect {
				return
			}
			next(k2, "df.tail()") // right after a restore small groups are re-checked once
			if cp := next(k2, "df.tail()"); slices.Contains(cp.Saved, "f") {
				t.Fatalf("an untouched restored figure was saved again: %v", cp.Saved)
			}
			if cp := next(k2, `plt.title("after restore")`); !slices.Contains(cp.Saved, "f") {
				t.Fatalf("a change to the restored figure was not saved: %v", cp.Saved)
			}
			killKernel(t, k2)
			k3 := agentKernel(t, c, ws, spool)
			if _, err := c.Restore(ctx, k3, "fig", "", "", false); err != nil {
				t.Fatal(err)
			}
			if got := eval(t, k3, "ax.get_title()"); got != "'after restore'" {
				t.Fatalf("restored title %s", got)
			}
		})
	}
}

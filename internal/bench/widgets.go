package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// widgetCells draw n interact-style sliders (each a slider, its layout and style: 3 widget models)
// and one interact, so the checkpoint's "@ipywidgets" state holds 3n+6 models (issue 37).
const widgetCells = `import ipywidgets as widgets
from ipywidgets import interact
@interact(n=(0, 20))
def square(n=5):
    print("n =", n)
sliders = [widgets.IntSlider(i, description=str(i)) for i in range(%d)]
x = 0`

// widgetSwitch turns the capture of the widgets on or off in the kernel (off: the turn as it would
// be without the widgets' state; the widgets still pickle by model id).
const widgetSwitch = `import carryover_agent.widgetstate as __w
if not hasattr(__w, '_real'): __w._real = __w.capture
__w.capture = __w._real if %s else (lambda skipped: None)
del __w`

// benchWidgetsTurn measures a turn that changes no widget in a kernel with many live widgets, with
// the widgets' capture on and off (turns alternate in blocks, medians), and a turn after one slider
// moved: what saving widgets costs beside the same turn without it, in the same run.
func benchWidgetsTurn(ctx context.Context, env *benchEnv, spec *kernel.Spec, reps, n int) ([]benchRow, error) {
	dir, ws, st, err := benchStore(ctx, env, "checkpoint-widgets", "widgets.sqlite", "bench")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	wb := &ckptBench{ctx: ctx, cp: &persistence.Checkpointer{Store: st, Retention: 3}, spec: spec, ws: ws}
	k, err := wb.start(filepath.Join(dir, "spool"))
	if err != nil {
		return nil, err
	}
	wb.k = k
	defer func() { _ = k.Shutdown(context.Background()) }()
	if err := wb.run(fmt.Sprintf(widgetCells, n)); err != nil {
		return nil, err
	}
	if _, _, err := wb.checkpoint("x += 1"); err != nil {
		return nil, err
	}
	var on, off, moved []time.Duration
	for round := 0; round < reps; round++ {
		for _, capture := range []bool{true, false} {
			if err := wb.run(fmt.Sprintf(widgetSwitch, map[bool]string{true: "True", false: "False"}[capture])); err != nil {
				return nil, err
			}
			for i := 0; i < 5; i++ {
				_, d, err := wb.checkpoint("x += 1")
				if err != nil {
					return nil, err
				}
				if capture {
					on = append(on, d)
				} else {
					off = append(off, d)
				}
			}
		}
		if err := wb.run(fmt.Sprintf(widgetSwitch, "True")); err != nil {
			return nil, err
		}
		_, d, err := wb.checkpoint(fmt.Sprintf("sliders[%d].value += 1", round%n))
		if err != nil {
			return nil, err
		}
		moved = append(moved, d)
	}
	dOn, dOff, dMoved := percentile(on, 50), percentile(off, 50), percentile(moved, 50)
	note := fmt.Sprintf("%d widget models live; medians of %d turns each, alternating", 3*n+6, len(on))
	return []benchRow{
		{Name: "turn changing no widget, widgets saved", Ours: fmtDur(dOn), Peer: fmtDur(dOff) + " (widgets not captured)",
			Ratio: ratio(dOn, dOff), Note: note},
		{Name: "turn moving one slider, widgets saved", Ours: fmtDur(dMoved), Peer: fmtDur(dOff) + " (widgets not captured)",
			Ratio: ratio(dMoved, dOff), Note: fmt.Sprintf("median of %d turns", len(moved))},
	}, nil
}

// widgetsN is how many sliders the widgets' turn draws: 300 (900 models, a session with many
// tqdm bars), 20 in quick mode.
func widgetsN(env *benchEnv) int {
	if env.Quick {
		return 20
	}
	return 300
}

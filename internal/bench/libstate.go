package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// libSettingsCells set up a data-science kernel whose libraries' settings differ from their
// defaults (issue 41): a style, pandas and numpy options, a logger, a warning filter, and names bound
// to modules' objects.
const libSettingsCells = `import logging, warnings, numpy as np, pandas as pd, scipy.stats
import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt
from scipy.stats import norm
from matplotlib import rcParams
plt.style.use('ggplot'); rcParams['lines.linewidth'] = 3
pd.set_option('display.max_rows', 20); np.set_printoptions(precision=3)
logging.getLogger('app').setLevel(logging.INFO); warnings.filterwarnings('ignore', category=FutureWarning)
df = pd.DataFrame({'a': range(1000)}); x = 0`

// libSwitch turns the capture of the libraries' settings on or off in the kernel (off: the turn as
// it was before they were saved, without even rcParams).
const libSwitch = `import carryover_agent.libstate as __l
if not hasattr(__l, '_real'): __l._real = __l.capture
__l.capture = __l._real if %s else (lambda skipped: [])
del __l`

// libCaptureTime times the capture alone in the kernel, median of 200 calls, in microseconds
// (__bench_us).
const libCaptureTime = `import carryover_agent.libstate as __l, time as __t
__ts = []
for __i in range(200):
    __t0 = __t.perf_counter(); __l.capture({}); __ts.append(__t.perf_counter() - __t0)
__bench_us = round(sorted(__ts)[100] * 1e6, 1)
del __l, __t, __ts, __i, __t0`

// benchSettingsTurn measures a turn that changes no setting, in a kernel whose settings differ from
// the defaults, with the settings' capture on and off (turns alternate in blocks, medians): the
// extra cost of the library-state fingerprint beside the turn's cost, in the same run.
func benchSettingsTurn(ctx context.Context, env *benchEnv, spec *kernel.Spec, reps int) ([]benchRow, error) {
	dir, ws, st, err := benchStore(ctx, env, "checkpoint-settings", "settings.sqlite", "bench")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	sb := &ckptBench{ctx: ctx, cp: &persistence.Checkpointer{Store: st, Retention: 3}, spec: spec, ws: ws}
	k, err := sb.start(filepath.Join(dir, "spool"))
	if err != nil {
		return nil, err
	}
	sb.k = k
	defer func() { _ = k.Shutdown(context.Background()) }()
	if err := sb.run(libSettingsCells); err != nil {
		return nil, err
	}
	if _, _, err := sb.checkpoint("x += 1"); err != nil {
		return nil, err
	}
	var on, off []time.Duration
	for round := 0; round < reps; round++ {
		for _, capture := range []bool{true, false} {
			if err := sb.run(fmt.Sprintf(libSwitch, map[bool]string{true: "True", false: "False"}[capture])); err != nil {
				return nil, err
			}
			for i := 0; i < 5; i++ {
				_, d, err := sb.checkpoint("x += 1")
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
	}
	if err := sb.run(fmt.Sprintf(libSwitch, "True")); err != nil {
		return nil, err
	}
	capUS, err := sb.k.Eval(ctx, libCaptureTime, "str(__bench_us)")
	if err != nil {
		return nil, err
	}
	capUS = strings.Trim(capUS, "'\"")
	dOn, dOff := percentile(on, 50), percentile(off, 50)
	return []benchRow{{Name: "turn changing no setting, settings saved (style, options, logger, filter)",
		Ours: fmtDur(dOn), Peer: fmtDur(dOff) + " (settings not captured)", Ratio: ratio(dOn, dOff),
		Note: fmt.Sprintf("medians of %d turns each, alternating; the capture alone: %s us (median of 200, in the kernel)",
			len(on), capUS)}}, nil
}

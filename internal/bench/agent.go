package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/carryover/carryover/configs"
)

// The agent section measures what an agent loop waits for after a pause in its work: the run that
// wakes a hibernated session (new kernel from the pool + restore of its last checkpoint), for a small
// namespace and for 1 GiB of state, beside the same run on a live kernel, and a forced rotation.

func benchAgent(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	h, err := startBenchSrv(ctx, env, "agent", func(c *configs.Config) { c.Pool.Size = 2; c.Cull.IdleSeconds = 0 })
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, serr := h.stop(); err == nil {
			err = serr
		}
	}()
	reps := 5
	if env.Quick {
		reps = 1
	}
	elems, label := env.bigArray()
	cases := []struct {
		name, setup, probe string
	}{
		{"small namespace", "import json, math\nitems = list(range(1000))\nconf = {'a': 1, 'b': [1, 2, 3]}\ndef f(x):\n    return x * 2\nclass C:\n    pass\nc = C()", "len(items) + f(conf['a'])"},
		{label + " numpy array", fmt.Sprintf("import numpy as np\nbig = np.ones(%d)\nlabel = 'x'", elems), "big[:10].sum()"},
	}
	for _, cs := range cases {
		id, _, err := h.createSession(ctx)
		if err != nil {
			return rows, err
		}
		if _, a, err := h.run(ctx, id, cs.setup); err != nil || a.Status != "ok" {
			return rows, fmt.Errorf("%s setup: %v %+v", cs.name, err, a.Error)
		}
		var live, wake, rotate []time.Duration
		for i := 0; i < reps; i++ {
			d, a, err := h.run(ctx, id, cs.probe)
			if err != nil || a.Status != "ok" {
				return rows, fmt.Errorf("%s probe: %v", cs.name, err)
			}
			live = append(live, d)
			if _, err := h.c.Hibernate(ctx, id); err != nil {
				return rows, err
			}
			h.settle(600 * time.Millisecond) // let the pool refill, as it would between an agent's turns
			d, a, err = h.run(ctx, id, cs.probe)
			if err != nil || a.Status != "ok" {
				return rows, fmt.Errorf("%s wake: %v", cs.name, err)
			}
			wake = append(wake, d)
			t0 := time.Now()
			_, err = h.c.Rotate(ctx, id)
			d = time.Since(t0)
			if err != nil {
				return rows, err
			}
			rotate = append(rotate, d)
			h.settle(600 * time.Millisecond)
		}
		lm, wm, rm := percentile(live, 50), percentile(wake, 50), percentile(rotate, 50)
		rows = append(rows,
			benchRow{Name: "wake from hibernation, " + cs.name + " (median)", Ours: fmtDur(wm), Peer: fmtDur(lm) + " live", Ratio: ratio(wm, lm),
				Note: fmt.Sprintf("n=%d; the run that wakes it: warm kernel from the pool + restore of the last checkpoint + the run; peer: the same run on a live kernel", reps)},
			benchRow{Name: "forced rotation, " + cs.name + " (median)", Ours: fmtDur(rm),
				Note: "POST /rotate: checkpoint, new kernel from the pool, restore, switch, old kernel stopped"})
		if err := h.c.DeleteSession(ctx, id); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

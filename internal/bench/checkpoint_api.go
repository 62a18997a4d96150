package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/carryover/carryover/client"
)

// The checkpoint-api section re-measures issue 25's table the way the issue measured it: through the
// API (POST /run) on the default config, sandbox on, each checkpoint's own duration as the run's
// answer reports it, beside pickle.dumps of the same value in the same kernel. checkpoint-nested
// measures the engine alone (a kernel and a store, no server); this is what an agent loop sees.

// apiShape is one value of the table: the code that makes it (with %[1]d, a fresh offset per
// repetition) and the turns that follow its first save.
type apiShape struct {
	name, label, code string
	turns             []string
	where             string // "sandbox on" or "sandbox off": the server's config, in each first save's name
}

func benchCheckpointAPI(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	h, err := startBenchSrv(ctx, env, "ckptapi", nil) // the default config
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, serr := h.stop(); err == nil {
			err = serr
		}
	}()
	id, _, err := h.createSession(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = h.c.DeleteSession(ctx, id) }()
	n, items, reps := 1_000_000, 200_000, 3
	if env.Quick {
		n, items, reps = 10_000, 5_000, 1
	}
	shapes := []apiShape{
		{"rows", fmt.Sprintf("%d nested records", n),
			fmt.Sprintf("rows = [{'id': i + %%[1]d, 'name': 'n%%%%d' %%%% i, 'v': [i, i + 1]} for i in range(%d)]", n),
			[]string{fmt.Sprintf("rows[%d]['name'] = 'changed'", n/2), "rows[7]['v'][0] = -1", "x = 1"}, ""},
		{"api", fmt.Sprintf("api shape, %d items", items),
			fmt.Sprintf("api = {'total': %d, 'items': [{'id': i + %%[1]d, 'tags': ['t%%%%d' %%%% (i %%%% 7), 'x'], "+
				"'meta': {'k': i, 'ok': i %%%% 2 == 0}} for i in range(%d)]}", items, items),
			[]string{"api['items'][100]['meta']['k'] = -5"}, ""},
		{"flat", fmt.Sprintf("%d flat records", n),
			fmt.Sprintf("flat = [{'id': i + %%[1]d, 'name': 'n%%%%d' %%%% i} for i in range(%d)]", n),
			[]string{fmt.Sprintf("flat[%d]['name'] = 'changed'", n/2)}, ""},
		{"df", fmt.Sprintf("DataFrame, JSON column, %d rows", items),
			fmt.Sprintf("import pandas as pd\ndf = pd.DataFrame({'id': range(%%[1]d, %%[1]d + %d), "+
				"'doc': [{'k': i + %%[1]d, 'tags': ['a', 'b']} for i in range(%d)]})", items, items),
			[]string{"df.loc[7, 'doc']['tags'].append('c')"}, ""},
	}
	where := "sandbox off"
	if h.sandbox {
		where = "sandbox on"
	}
	for _, s := range shapes {
		s.where = where
		more, err := apiShapeRows(ctx, h, id, s, reps)
		rows = append(rows, more...)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// apiShapeRows: the value's first save (median of reps fresh values, each beside pickle.dumps of
// it), then one row per turn; the value is deleted at the end.
func apiShapeRows(ctx context.Context, h *benchSrv, id string, s apiShape, reps int) ([]benchRow, error) {
	var firsts, floors []time.Duration
	var last *client.CheckpointResult
	var size int64
	for i := 0; i < reps; i++ {
		cp, err := apiCheckpoint(ctx, h, id, fmt.Sprintf(s.code, i))
		if err != nil {
			return nil, err
		}
		floor, n, err := apiPickleFloor(ctx, h, id, s.name)
		if err != nil {
			return nil, err
		}
		firsts, floors, last, size = append(firsts, ckptDur(cp)), append(floors, floor), cp, n
		if i < reps-1 {
			if _, err := apiCheckpoint(ctx, h, id, "del "+s.name); err != nil {
				return nil, err
			}
		}
	}
	first, floor := percentile(firsts, 50), percentile(floors, 50)
	peer := fmt.Sprintf("%s (pickle.dumps, %s)", fmtDur(floor), fmtBytes(size))
	rows := []benchRow{{Name: s.label + ", first save (API, " + s.where + ")", Ours: fmtDur(first), Peer: peer,
		Ratio: ratio(first, floor) + " " + verdict(float64(first) <= 1.3*float64(floor), "<= 1.3x pickle"),
		Note:  fmt.Sprintf("n=%d, medians; last: %s", reps, apiCkptNote(last))}}
	for _, turn := range s.turns {
		cp, err := apiCheckpoint(ctx, h, id, turn)
		if err != nil {
			return rows, err
		}
		d := ckptDur(cp)
		ok := d <= 100*time.Millisecond && cp.BytesWritten*100 <= cp.Timings.SlicedBytes
		if !strings.Contains(turn, s.name) { // the turn does not touch the value
			ok = d <= 100*time.Millisecond && cp.BytesWritten < 64<<10
		}
		rows = append(rows, benchRow{Name: "  " + turn, Ours: fmtDur(d), Peer: peer,
			Ratio: ratio(d, floor) + " " + verdict(ok, "<= 100 ms, <= 1% written"), Note: apiCkptNote(cp)})
	}
	_, err := apiCheckpoint(ctx, h, id, "del "+s.name)
	return rows, err
}

// apiCheckpoint runs code and returns its turn's checkpoint.
func apiCheckpoint(ctx context.Context, h *benchSrv, id, code string) (*client.CheckpointResult, error) {
	_, a, err := h.run(ctx, id, code)
	if err != nil || a.Status != "ok" {
		return nil, fmt.Errorf("run %q: %v %+v", code, err, a.Error)
	}
	if a.Checkpoint == nil {
		return nil, fmt.Errorf("run %q: no checkpoint (%s)", code, a.CheckpointError)
	}
	return a.Checkpoint, nil
}

// apiPickleFloor times pickle.dumps of a value (protocol 5, the agent's) in the session's kernel.
func apiPickleFloor(ctx context.Context, h *benchSrv, id, name string) (time.Duration, int64, error) {
	code := "import time as __t, pickle as __p\n__t0 = __t.perf_counter(); __n = len(__p.dumps(" + name +
		", 5)); print(__t.perf_counter() - __t0, __n)\ndel __t, __p, __t0, __n"
	_, a, err := h.run(ctx, id, code)
	if err != nil || a.Status != "ok" {
		return 0, 0, fmt.Errorf("pickle floor: %v %+v", err, a.Error)
	}
	f := strings.Fields(a.Stdout)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("pickle floor answer %q", a.Stdout)
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, 0, err
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(sec * float64(time.Second)), n, err
}

func ckptDur(cp *client.CheckpointResult) time.Duration {
	return time.Duration(cp.DurationMS * float64(time.Millisecond))
}

func apiCkptNote(cp *client.CheckpointResult) string {
	t := cp.Timings
	s := fmt.Sprintf("%s written; detect %.2f / serialize %.2f / write %.2f ms; re-pickled %s of %s sliced",
		fmtBytes(cp.BytesWritten), t.DetectMS, t.SerializeMS, t.WriteMS, fmtBytes(t.SlicedRepickledBytes), fmtBytes(t.SlicedBytes))
	for _, u := range t.Unsliced {
		s += "; " + u.Name + " " + u.Reason
	}
	return s
}

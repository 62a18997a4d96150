package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// The checkpoint-nested section measures engine v3 (issue 25) on the data agents hold: parsed JSON.
// A million nested records (first save, one changed field, one changed nested element, a turn that
// does not touch them), the api shape (a small dict holding 200,000 items with a tag list and a meta
// dict) and a DataFrame with a JSON column. Each row is beside pickle.dumps of the same object in
// the same kernel, and says the bytes written. `carryover-bench --only nested` runs it alone.

func benchNested(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	b, done, err := newNestedBench(ctx, env)
	if err != nil {
		return nil, err
	}
	defer done()
	n, items, reps := 1_000_000, 200_000, 5
	if env.Quick {
		n, items, reps = 10_000, 5_000, 1
	}
	// Each shape's code takes an offset (%[1]d), so every repetition's value is new to the store.
	rows, err := b.nestedRows("rows", fmt.Sprintf("rows = [{'id': i + %%[1]d, 'name': 'n%%%%d' %%%% i, 'v': [i, i + 1]} for i in range(%d)]", n),
		fmt.Sprintf("%d nested records", n), reps, []string{fmt.Sprintf("rows[%d]['name'] = 'changed'", n/2), "rows[7]['v'][0] = -1", "x = 1"})
	if err != nil {
		return rows, err
	}
	if err := b.drop("rows"); err != nil {
		return rows, err
	}
	more, err := b.nestedRows("api", fmt.Sprintf("api = {'total': %d, 'items': [{'id': i + %%[1]d, 'tags': ['t%%%%d' %%%% (i %%%% 7), 'x'], "+
		"'meta': {'k': i, 'ok': i %%%% 2 == 0}} for i in range(%d)]}", items, items),
		fmt.Sprintf("api shape, %d items", items), reps, []string{"api['items'][100]['meta']['k'] = -5"})
	rows = append(rows, more...)
	if err != nil {
		return rows, err
	}
	if err := b.drop("api"); err != nil {
		return rows, err
	}
	more, err = b.nestedRows("df", fmt.Sprintf("import pandas as pd\ndf = pd.DataFrame({'id': range(%%[1]d, %%[1]d + %d), "+
		"'doc': [{'k': i + %%[1]d, 'tags': ['a', 'b']} for i in range(%d)]})", items, items),
		fmt.Sprintf("DataFrame, JSON column, %d rows", items), reps, []string{"df.loc[7, 'doc']['tags'].append('c')"})
	return append(rows, more...), err
}

// drop deletes a value and checkpoints, so freeing it (the agent's caches hold it until the next
// snapshot) is not counted in the next row.
func (b *ckptBench) drop(name string) error {
	if err := b.run("del " + name); err != nil {
		return err
	}
	_, _, err := b.checkpoint("")
	return err
}

// newNestedBench starts a kernel with the agent on a fresh store, as the checkpoint section does.
func newNestedBench(ctx context.Context, env *benchEnv) (*ckptBench, func(), error) {
	python := env.python()
	spec, err := kernel.FindSpec("python", python)
	if err != nil {
		return nil, nil, err
	}
	dir, ws, st, err := benchStore(ctx, env, "nested", "bench.sqlite", "bench")
	if err != nil {
		return nil, nil, err
	}
	spoolBase := dir
	if d, err := os.MkdirTemp("/dev/shm", "carryover-bench-"); err == nil {
		spoolBase = d
	}
	b := &ckptBench{ctx: ctx, cp: &persistence.Checkpointer{Store: st, Retention: 3}, db: filepath.Join(dir, "bench.sqlite"),
		spec: spec, ws: ws, spool: filepath.Join(spoolBase, "spool")}
	done := func() {
		if b.k != nil {
			_ = b.k.Shutdown(context.Background())
		}
		st.Close()
		if spoolBase != dir {
			_ = os.RemoveAll(spoolBase)
		}
	}
	if b.k, err = b.start(b.spool); err != nil {
		done()
		return nil, nil, err
	}
	return b, done, nil
}

// nestedRows: the first checkpoint of the value made by code (beside pickle.dumps of it, goal
// <= 1.3x), then one checkpoint per turn, each judged by the goal of a one-item change: <= 100 ms
// and <= 1% of the container's bytes written (a turn that does not touch it must write ~nothing).
func (b *ckptBench) nestedRows(name, code, label string, reps int, turns []string) ([]benchRow, error) {
	var rows []benchRow
	r, first, floor, size, err := b.firstSaves(name, code, reps)
	if err != nil {
		return rows, err
	}
	peer := fmt.Sprintf("%s (pickle.dumps, %s)", fmtDur(floor), fmtBytes(size))
	rows = append(rows, benchRow{Name: label + " (first save)", Ours: fmtDur(first), Peer: peer,
		Ratio: ratio(first, floor) + " " + verdict(float64(first) <= 1.3*float64(floor), "<= 1.3x pickle"),
		Note:  fmt.Sprintf("n=%d, medians; last: %s", reps, nestedNote(r))})
	for _, turn := range turns {
		r, d, err := b.checkpoint(turn)
		if err != nil {
			return rows, err
		}
		ok := d <= 100*time.Millisecond && r.BytesWritten*100 <= r.Timings.SlicedBytes
		if !strings.Contains(turn, name) { // the turn does not touch the container
			ok = d <= 100*time.Millisecond && r.BytesWritten < 64<<10
		}
		rows = append(rows, benchRow{Name: "  " + turn, Ours: fmtDur(d), Peer: peer, Ratio: ratio(d, floor) + " " +
			verdict(ok, "<= 100 ms, <= 1% written"), Note: nestedNote(r)})
	}
	return rows, nil
}

// firstSaves times reps first saves of the value code makes, each of a value no earlier one shares
// a chunk with (code's offset is the repetition), each beside pickle.dumps of the same value, and
// returns the medians (and the last save's result; its value stays for the turns). One sample of
// each swung the ratio by 0.3 from run to run: pickle.dumps of the DataFrame took 50-64 ms, the
// cyclic collector deciding.
func (b *ckptBench) firstSaves(name, code string, reps int) (*carryover.CheckpointResult, time.Duration, time.Duration, int64, error) {
	var (
		r             *carryover.CheckpointResult
		firsts, peers []time.Duration
		size          int64
	)
	for i := 0; i < reps; i++ {
		if i > 0 {
			if err := b.drop(name); err != nil {
				return nil, 0, 0, 0, err
			}
		}
		var first, floor time.Duration
		var err error
		if r, first, err = b.checkpoint(fmt.Sprintf(code, i)); err != nil {
			return nil, 0, 0, 0, err
		}
		if floor, size, err = b.pickleFloor(name); err != nil {
			return nil, 0, 0, 0, err
		}
		firsts, peers = append(firsts, first), append(peers, floor)
	}
	return r, percentile(firsts, 50), percentile(peers, 50), size, nil
}

func nestedNote(r *carryover.CheckpointResult) string {
	t := r.Timings
	s := fmt.Sprintf("re-pickled %s of %s sliced", fmtBytes(t.SlicedRepickledBytes), fmtBytes(t.SlicedBytes))
	for _, u := range t.Unsliced {
		s += "; " + u.Name + " " + u.Reason
	}
	return ckptNote(r, s)
}

// pickleFloor times pickle.dumps of a value (protocol 5, the agent's) in the kernel: seconds, bytes.
func (b *ckptBench) pickleFloor(name string) (time.Duration, int64, error) {
	code := "import time as __t, pickle as __p\n__t0 = __t.perf_counter(); __n = len(__p.dumps(" + name +
		", 5)); __bench_floor = '%r %d' % (__t.perf_counter() - __t0, __n)\ndel __t, __p, __t0, __n"
	out, err := b.k.Eval(b.ctx, code, "__bench_floor")
	if err != nil {
		return 0, 0, err
	}
	_ = b.run("del __bench_floor")
	var f [2]string
	if _, err := fmt.Sscan(strings.Trim(out, "'\""), &f[0], &f[1]); err != nil {
		return 0, 0, fmt.Errorf("pickle floor answer %q: %w", out, err)
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, 0, err
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(sec * float64(time.Second)), n, err
}

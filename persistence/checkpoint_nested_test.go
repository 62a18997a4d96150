package persistence_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// noDetection is the agent's test-only switch (carryover_agent/containers/nested.py NO_DETECTION_ENV): with it
// set in this process, every kernel these tests start takes every slice as unchanged, and
// TestNestedMutationsSurviveKill must fail. That is how it shows it tests the change detection:
//
//	CARRYOVER_AGENT_NO_CHANGE_DETECTION=1 go test -run TestNestedMutationsSurviveKill ./persistence/
const noDetection = "CARRYOVER_AGENT_NO_CHANGE_DETECTION"

// canonCode defines __canon in a kernel: a value as nested tuples equal only when types, order and
// contents are (sets by sorted members), so a probe compares a restored value exactly; and __digest,
// the sha256 of the canon of its arguments, made with the garbage collector paused: the canon of
// 40,000 records allocates millions of tuples, and the collections they trigger tripled its cost
// (3.0 s -> 1.1 s of CPU per probe; TestNestedMutationsSurviveKill takes 26 probes).
const canonCode = `def __canon(x):
    t = type(x)
    if t is dict:
        return ('dict', tuple((__canon(k), __canon(v)) for k, v in x.items()))
    if t in (list, tuple):
        return (t.__name__, tuple(__canon(v) for v in x))
    if t in (set, frozenset):
        return (t.__name__, tuple(sorted(repr(__canon(v)) for v in x)))
    return (t.__name__, repr(x))
def __digest(*xs):
    import gc, hashlib
    was = gc.isenabled()
    gc.disable()
    try:
        return hashlib.sha256(repr(__canon(xs)).encode()).hexdigest()
    finally:
        if was:
            gc.enable()
`

// nestedKernel starts a kernel with the agent, the probe helper and (when this process has it) the
// test-only switch.
func nestedKernel(t *testing.T, c *persistence.Checkpointer, ws, spool string) *kernel.Kernel {
	t.Helper()
	k := agentKernel(t, c, ws, spool)
	if os.Getenv(noDetection) != "" {
		run(t, k, "import os; os.environ['"+noDetection+"'] = '1'")
	}
	run(t, k, canonCode)
	return k
}

// TestNestedMutationsSurviveKill: a list of 20,000 nested records (dicts, lists, sets, tuples,
// frozensets inside each) takes one mutation per turn, at every depth and of every kind; after each
// turn's checkpoint the kernel is killed with SIGKILL and the next one restores it, and the restored
// value must equal the live one exactly. An in-place change writes about one slice. The next turn
// runs in the restored kernel, so detection is also tested on caches seeded by a restore. (20,000
// records make more than the ten slices the one-slice check needs; 40,000 took 50 CPU-s against 31.)
func TestNestedMutationsSurviveKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "nested")
	k := nestedKernel(t, c, ws, spool)
	run(t, k, "rows = [{'id': i, 'name': 'n%d' % i, 'v': [i, i + 1], 'meta': {'k': i, 'tags': ['a', 'b'], "+
		"'deep': {'x': [i]}}, 's': {i, -i}, 't': (i, 't')} for i in range(20000)]")
	first, err := c.Checkpoint(ctx, k, "nested", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	if first.Timings.SlicedBytes == 0 || len(first.Timings.Unsliced) != 0 {
		t.Fatalf("first checkpoint timings %+v: want the nested records sliced", first.Timings)
	}
	const probe = "__digest(rows)"
	mutations := []struct {
		code    string
		inPlace bool // writes about one slice
	}{
		{"rows[5]['meta']['k'] = -5", true},                           // dict value
		{"rows[10000]['meta']['deep']['x'][0] = 10**20", true},        // list element, three levels down
		{"rows[7]['v'][0] = -1", true},                                // list element
		{"rows[11]['s'].add(10**30)", true},                           // set member added
		{"rows[12]['s'].discard(-12)", true},                          // set member removed
		{"rows[14]['t'] = (14, 'replaced')", true},                    // tuple replaced
		{"rows[16]['meta']['new'] = [1, {'a': {2}}]", true},           // key added
		{"del rows[17]['meta']['tags']", true},                        // key removed
		{"rows[19999]['meta']['deep']['x'].append([None])", true},     // list appended to, at the end
		{"rows.append({'id': -1, 'v': [[]]})", false},                 // item appended
		{"rows.pop(15000)", false},                                    // item removed
		{"rows[100], rows[101] = rows[101], rows[100]", false},        // items reordered
		{"rows[12500]['meta']['deep']['x'] = rows[12500]['v']", true}, // a list bound twice in one item
	}
	for i, m := range mutations {
		turn := i + 2
		run(t, k, m.code)
		res, err := c.Checkpoint(ctx, k, "nested", turn, ws)
		if err != nil {
			t.Fatal(err)
		}
		tm := res.Timings
		if m.inPlace && (tm.SlicedRepickledBytes == 0 || tm.SlicedRepickledBytes*10 > tm.SlicedBytes ||
			res.BytesWritten*5 > first.BytesWritten) {
			t.Errorf("%s: re-pickled %d of %d bytes, wrote %d (first %d): want about one slice", m.code,
				tm.SlicedRepickledBytes, tm.SlicedBytes, res.BytesWritten, first.BytesWritten)
		}
		live := eval(t, k, probe)
		killKernel(t, k)
		k = nestedKernel(t, c, ws, spool)
		rr, err := c.Restore(ctx, k, "nested", "", ws, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.Failed) != 0 {
			t.Fatalf("%s: restore failed: %+v", m.code, rr.Failed)
		}
		if got := eval(t, k, probe); got != live {
			t.Errorf("%s: restored after kill -9 differs from the live value (change not saved)", m.code)
		}
	}
	if got := eval(t, k, "rows[12500]['meta']['deep']['x'] is rows[12500]['v']"); got != "True" {
		t.Errorf("a list bound twice in one item came back as two: %s", got)
	}
}

// TestNestedAliasingSurvivesKill: the same inner list bound in two items and to a name is one object
// after a kill -9 and a restore (the container is pickled whole that turn, and says so in
// timings.unsliced); a name bound to a list inside one item stays that list, with the container still
// in slices.
func TestNestedAliasingSurvivesKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "alias")
	k := nestedKernel(t, c, ws, spool)
	run(t, k, "rows = [{'id': i, 'v': [i], 'meta': {'tags': ['a']}} for i in range(40000)]")
	if _, err := c.Checkpoint(ctx, k, "alias", 1, ws); err != nil {
		t.Fatal(err)
	}
	run(t, k, "tags = rows[5]['meta']['tags']")
	res, err := c.Checkpoint(ctx, k, "alias", 2, ws)
	if err != nil {
		t.Fatal(err)
	}
	if res.Timings.SlicedBytes == 0 || len(res.Timings.Unsliced) != 0 {
		t.Errorf("a name bound inside an item: timings %+v, want the container still sliced", res.Timings)
	}
	run(t, k, "shared = [1, 2]; rows[10]['w'] = shared; rows[39000]['w'] = shared")
	res, err = c.Checkpoint(ctx, k, "alias", 3, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Timings.Unsliced) != 1 || res.Timings.Unsliced[0].Name != "rows" ||
		!strings.Contains(res.Timings.Unsliced[0].Reason, "twice") {
		t.Errorf("timings.unsliced %+v: want rows named, pickled whole (a list in it twice)", res.Timings.Unsliced)
	}
	killKernel(t, k)
	k = nestedKernel(t, c, ws, spool)
	rr, err := c.Restore(ctx, k, "alias", "", ws, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failed) != 0 {
		t.Fatalf("restore failed: %+v", rr.Failed)
	}
	const probe = "(rows[10]['w'] is rows[39000]['w'] is shared, tags is rows[5]['meta']['tags'], shared, len(rows))"
	if got := eval(t, k, probe); got != "(True, True, [1, 2], 40000)" {
		t.Fatalf("after restore %s = %s", probe, got)
	}
}

// TestHolderAndJSONColumnThroughServer: the api shape (a small dict holding 50,000 items with a tag
// list and a meta dict) and a DataFrame with a JSON column: a change deep in one item writes about
// one slice, and both come back equal after a kill -9.
func TestHolderAndJSONColumnThroughServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "api")
	k := nestedKernel(t, c, ws, spool)
	run(t, k, "import pandas as pd\n"+
		"api = {'total': 50000, 'items': [{'id': i, 'tags': ['x', 'y'], 'meta': {'k': i}} for i in range(50000)]}\n"+
		"df = pd.DataFrame({'id': range(50000), 'doc': [{'k': i, 'tags': ['a']} for i in range(50000)]})")
	first, err := c.Checkpoint(ctx, k, "api", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	for i, code := range []string{"api['items'][100]['meta']['k'] = -5", "df.loc[7, 'doc']['tags'].append('b')"} {
		run(t, k, code)
		res, err := c.Checkpoint(ctx, k, "api", i+2, ws)
		if err != nil {
			t.Fatal(err)
		}
		tm := res.Timings
		if tm.SlicedRepickledBytes == 0 || tm.SlicedRepickledBytes*10 > tm.SlicedBytes || res.BytesWritten*5 > first.BytesWritten {
			t.Errorf("%s: re-pickled %d of %d bytes, wrote %d (first %d): want about one slice", code,
				tm.SlicedRepickledBytes, tm.SlicedBytes, res.BytesWritten, first.BytesWritten)
		}
	}
	const probe = "__digest(api, df['doc'].tolist())"
	live := eval(t, k, probe)
	killKernel(t, k)
	k = nestedKernel(t, c, ws, spool)
	rr, err := c.Restore(ctx, k, "api", "", ws, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failed) != 0 {
		t.Fatalf("restore failed: %+v", rr.Failed)
	}
	if got := eval(t, k, probe); got != live {
		t.Fatalf("restored api/df differ from the live ones")
	}
}

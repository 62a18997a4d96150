package persistence_test

import (
	"context"
	"testing"
)

// TestSlicedContainerThroughServer: a list of 50,000 records goes through the Go side in slices. A
// turn that changes one record writes one slice, the container comes back equal after the kernel is
// killed with SIGKILL, and the restored kernel still writes one slice for the next change (the agent's
// caches are seeded from the restored slices).
func TestSlicedContainerThroughServer(t *testing.T) {
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "s")
	k := agentKernel(t, c, ws, spool)
	run(t, k, "recs = [{'id': i, 'name': 'n%d' % i, 'ok': i % 3 == 0} for i in range(50000)]")
	first, err := c.Checkpoint(ctx, k, "s", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	if first.Timings.SlicedBytes == 0 || first.Timings.SlicedRepickledBytes != first.Timings.SlicedBytes {
		t.Fatalf("first checkpoint timings %+v: want the whole container sliced and pickled", first.Timings)
	}
	oneSlice := func(turn int, code string) {
		t.Helper()
		run(t, k, code)
		res, err := c.Checkpoint(ctx, k, "s", turn, ws)
		if err != nil {
			t.Fatal(err)
		}
		tm := res.Timings
		if tm.SlicedBytes == 0 || tm.SlicedRepickledBytes == 0 || tm.SlicedRepickledBytes*10 > tm.SlicedBytes {
			t.Errorf("turn %d (%s): re-pickled %d of %d bytes, want one slice", turn, code, tm.SlicedRepickledBytes, tm.SlicedBytes)
		}
		if res.BytesWritten*5 > first.BytesWritten {
			t.Errorf("turn %d wrote %d bytes, the first checkpoint %d", turn, res.BytesWritten, first.BytesWritten)
		}
	}
	oneSlice(2, "recs[123]['name'] = 'changed'")
	probe := "(recs[123], recs[49999], len(recs), sum(r['id'] for r in recs))"
	live := eval(t, k, probe)

	killKernel(t, k)
	k = agentKernel(t, c, ws, spool)
	rr, err := c.Restore(ctx, k, "s", "", ws, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Failed) != 0 {
		t.Fatalf("failed: %+v", rr.Failed)
	}
	if got := eval(t, k, probe); got != live {
		t.Fatalf("after restore %s = %s, live %s", probe, got, live)
	}
	oneSlice(3, "recs[40000]['ok'] = None")
}

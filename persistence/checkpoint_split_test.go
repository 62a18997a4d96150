package persistence_test

import (
	"context"
	"testing"

	"github.com/carryover/carryover/persistence"
)

// TestSplitBufferRestore: a large buffer is restored from two files written in parallel, the second
// mapped over the first's tail. The array comes back equal after SIGKILL, as one buffer (its part
// files both in the kernel's mappings); writes to both halves are tracked (the next checkpoint stores
// two chunks, not the array) and come back after a second SIGKILL.
func TestSplitBufferRestore(t *testing.T) {
	defer persistence.SetSplitBufferMin(1 << 20)()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "sp")
	k := agentKernel(t, c, ws, spool)
	run(t, k, "import numpy as np\nbig = np.random.default_rng(5).random(1 << 21)\nhead = big[:4]\ns0 = float(big.sum())")
	if _, err := c.Checkpoint(ctx, k, "sp", 1, ws); err != nil {
		t.Fatal(err)
	}
	// killAndRestore kills the kernel and restores the latest checkpoint into a new one.
	killAndRestore := func(which string) {
		t.Helper()
		killKernel(t, k)
		k = agentKernel(t, c, ws, spool)
		if rr, err := c.Restore(ctx, k, "sp", "", ws, true); err != nil || len(rr.Failed) != 0 {
			t.Fatalf("%s restore: %v %+v", which, err, rr)
		}
	}
	killAndRestore("first")
	check := "(float(big.sum()) == s0, big.flags.writeable, head.base is big or head.base is big.base, " +
		"sum('.p1 (deleted)' in l for l in open('/proc/self/maps')))"
	if got := eval(t, k, check); got != "(True, True, True, 1)" {
		t.Fatalf("restored big (equal, writeable, head a view of it, part files mapped): %s", got)
	}
	run(t, k, "big[0] = -1.0\nbig[-1] = -2.0\ns1 = float(big.sum())")
	res, err := c.Checkpoint(ctx, k, "sp", 2, ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dirty mode %q fallback %q", res.Timings.DirtyMode, res.Timings.DirtyFallback)
	if res.BytesWritten > 4<<20 {
		t.Errorf("two elements written, one in each part: %d bytes stored, want two 1 MiB chunks", res.BytesWritten)
	}
	killAndRestore("second")
	if got := eval(t, k, "(float(big[0]), float(big[-1]), float(big.sum()) == s1, float(head[0]))"); got != "(-1.0, -2.0, True, -1.0)" {
		t.Fatalf("after the second restore: %s", got)
	}
}

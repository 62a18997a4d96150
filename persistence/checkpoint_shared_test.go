package persistence_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// mapsMemfd is Python that says whether big's memory is mapped from a shared copy (a memfd).
const mapsMemfd = `(lambda a: any(l.split()[-2:][0].startswith('/memfd:carryover-buf') and int(l.split('-')[0], 16) <= a < int(l.split()[0].split('-')[1], 16) for l in open('/proc/self/maps') if 'memfd:' in l))(big.__array_interface__['data'][0])`

// mappedKB is Python that answers the resident kB (smaps' Rss) of the mapping holding big's data.
const mappedKB = `(lambda a, L: next(int(L[j].split()[1]) for i, l in enumerate(L) if 'memfd:carryover-buf' in l and int(l.split('-')[0], 16) <= a < int(l.split()[0].split('-')[1], 16) for j in range(i + 1, min(i + 40, len(L))) if L[j].startswith('Rss:')))(big.__array_interface__['data'][0], open('/proc/self/smaps').read().splitlines())`

// TestSharedBuffersCopyOnWrite restores one checkpoint of a 16 MiB array into two kernels as a
// fork's children: both map one node-wide copy, a write in one is seen by neither the other nor the
// parent, the writer's next checkpoint stores its change and restores equal, and the copy is
// released once no kernel maps it (the kernels exited, or the last one dropped its array).
func TestSharedBuffersCopyOnWrite(t *testing.T) {
	defer persistence.SetSharedBufferMin(1 << 20)()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "sh")
	c.Shared = persistence.NewSharedBuffers()
	parent := agentKernel(t, c, ws, spool)
	run(t, parent, "import numpy as np\nbig = np.random.default_rng(7).random(2 << 20)\nexp = big.copy()")
	saved, err := c.Checkpoint(ctx, parent, "sh", 1, ws)
	if err != nil {
		t.Fatal(err)
	}
	mustSession(t, c, "kid") // a fork: the copy of the checkpoint, as session kid's
	if _, err := c.CopyCheckpoint(ctx, "sh", saved.ID, "kid", nil); err != nil {
		t.Fatal(err)
	}
	child := func() *kernel.Kernel {
		t.Helper()
		k := agentKernel(t, c, ws, spool)
		rr, err := c.RestoreIntoNew(ctx, k, "kid", ws)
		if err != nil || len(rr.Failed) != 0 || rr.Timings.SharedBytes != 32<<20 { // big and exp: one copy of equal bytes
			t.Fatalf("restore: %v %+v", err, rr)
		}
		return k
	}
	a, b := child(), child()
	if n, bytes := c.Shared.Held(); n != 1 || bytes != 16<<20 {
		t.Fatalf("copies held: %d (%d bytes), want one of 16 MiB", n, bytes)
	}
	for _, k := range []*kernel.Kernel{a, b} {
		if got := eval(t, k, mapsMemfd); got != "True" {
			t.Fatalf("the child's array is not mapped from the shared copy: %s", got)
		}
		// Mapped whole at the restore: under the dirty tracker's userfaultfd write-protection Linux
		// maps no neighbouring page on a fault, and a first read faulted page by page (~0.45 s a GiB).
		if got := eval(t, k, mappedKB); got != "16384" {
			t.Errorf("the child's shared copy has %s kB mapped before any read, want all 16384", got)
		}
	}
	run(t, a, "big[0] = -1.0\nbig[-1] = -2.0")
	for who, k := range map[string]*kernel.Kernel{"sibling": b, "parent": parent} {
		if got := eval(t, k, "(float(big[0]) == float(exp[0]), float(big[-1]) == float(exp[-1]), bool((big == exp).all()))"); got != "(True, True, True)" {
			t.Fatalf("the %s sees the child's write: %s", who, got)
		}
	}
	res, err := c.Checkpoint(ctx, a, "kid", 2, ws)
	if err != nil {
		t.Fatal(err)
	}
	if res.BytesWritten > 4<<20 {
		t.Errorf("two elements written stored %d bytes (mode %q), want two 1 MiB chunks", res.BytesWritten, res.Timings.DirtyMode)
	}
	// The child's own checkpoint is no fork's copy: its restore shares only what a kernel maps
	// already (exp), not the changed big, and restores equal.
	k := agentKernel(t, c, ws, spool)
	if rr, err := c.RestoreIntoNew(ctx, k, "kid", ws); err != nil || rr.Timings.SharedBytes != 16<<20 {
		t.Fatalf("restore of the child's checkpoint: %v %+v", err, rr)
	}
	if got := eval(t, k, "(float(big[0]), float(big[-1]), bool((big[1:-1] == exp[1:-1]).all()))"); got != "(-1.0, -2.0, True)" {
		t.Fatalf("the child's checkpoint restored: %s", got)
	}
	killKernel(t, a)
	if n, _ := c.Shared.Held(); n != 1 {
		t.Fatalf("copies held with one child left: %d, want 1", n)
	}
	killKernel(t, b)
	if n, _ := c.Shared.Held(); n != 1 {
		t.Fatalf("copies held while k maps exp's: %d, want 1", n)
	}
	run(t, k, "del exp\nimport gc\ngc.collect()") // k's last mapping of a copy goes: released, k lives on
	waitReleased(t, c.Shared)
}

// waitReleased waits until no copy is held, and checks the server holds no memfd of one.
func waitReleased(t *testing.T, s *persistence.SharedBuffers) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for n, _ := s.Held(); n != 0; n, _ = s.Held() {
		if time.Now().After(deadline) {
			t.Fatalf("%d copies still held after their kernels exited", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); strings.Contains(l, "carryover-buf") {
			t.Fatalf("the server still holds %s", l)
		}
	}
}

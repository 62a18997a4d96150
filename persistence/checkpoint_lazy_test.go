package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// TestLazyRestore restores a large array lazily, with a fill slowed down so the array is used before
// it is filled: read (in user code and in a system call), written, forked and checkpointed half-way,
// and every value comes back equal after two kill -9s.
func TestLazyRestore(t *testing.T) {
	defer persistence.SetLazyBufferMin(1 << 20)()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "lz")
	c.Lazy = true
	k := agentKernel(t, c, ws, spool)
	run(t, k, "import numpy as np\nbig = np.random.default_rng(5).random(4 << 20)\nhead = big[:4]\nexp = big.copy()\ngone = np.ones(4 << 20)")
	if _, err := c.Checkpoint(ctx, k, "lz", 1, ws); err != nil {
		t.Fatal(err)
	}
	wake := func(which string) {
		t.Helper()
		killKernel(t, k)
		k = agentKernel(t, c, ws, spool)
		rr, err := c.RestoreIntoNew(ctx, k, "lz", ws)
		if err != nil || len(rr.Failed) != 0 {
			t.Fatalf("%s restore: %v %+v", which, err, rr)
		}
		if rr.Timings.LazyBytes != 96<<20 || rr.Timings.LazyOff != "" {
			t.Fatalf("%s restore: lazy bytes %d (%q), want the arrays' 96 MiB", which, rr.Timings.LazyBytes, rr.Timings.LazyOff)
		}
	}
	release := persistence.SetLazyHold()
	defer release()
	wake("first")
	// Before the fill is done: a read from user code, a write(2) of pages not filled yet (a fault
	// inside a system call), a write, and a checkpoint that does not wait for the fill.
	probe := "import os, carryover_agent.lazy as L\n" +
		"p0 = L.pending()\n" +
		"r, w = os.pipe()\n" +
		"os.write(w, memoryview(big)[3 << 20:(3 << 20) + 4].cast('B')[:32])\n" +
		"piped = os.read(r, 32) == exp[3 << 20:(3 << 20) + 4].tobytes()\n" +
		"mid = float(big[2 << 20]) == float(exp[2 << 20])\n" +
		"big[1] = -1.0\nbig[-1] = -2.0\nexp[1] = -1.0\nexp[-1] = -2.0\n" +
		// An array freed before its fill: its memory must not be reused by one the fill copies into.
		"del gone\nfresh = np.zeros(4 << 20)"
	run(t, k, probe)
	res, err := c.Checkpoint(ctx, k, "lz", 2, ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := eval(t, k, "(p0, L.pending(), piped, mid)"); !strings.HasPrefix(got, "(1, 1, True, True)") {
		t.Fatalf("(fill pending at the probe, still pending after the checkpoint, write(2) right, read right): %s", got)
	}
	if res.Timings.DirtyMode != "uffd" || res.BytesWritten > 4<<20 {
		t.Errorf("two elements written: mode %q (%q), %d bytes stored; want uffd and two 1 MiB chunks",
			res.Timings.DirtyMode, res.Timings.DirtyFallback, res.BytesWritten)
	}
	release()
	// A fork waits for the fill: the child sees the whole array.
	fork := "pid = os.fork()\n" +
		"if pid == 0:\n    os._exit(0 if bool((big == exp).all()) else 3)\n" +
		"forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])"
	run(t, k, fork)
	if got := eval(t, k, "(forked, L.pending(), bool((big == exp).all()), head.base is big or head.base is big.base, bool((fresh == 0).all()))"); got != "(0, 0, True, True, True)" {
		t.Fatalf("(child's exit, fills pending, equal, head a view of big, fresh still zeros): %s", got)
	}
	run(t, k, "big[7] = 7.0\nexp[7] = 7.0")
	if _, err := c.Checkpoint(ctx, k, "lz", 3, ws); err != nil {
		t.Fatal(err)
	}
	wake("second")
	if got := eval(t, k, "(bool((big == exp).all()), float(big[1]), float(big[-1]), float(big[7]))"); got != "(True, -1.0, -2.0, 7.0)" {
		t.Fatalf("after the second wake: %s", got)
	}
}

// damagedChunks is the store with every 1 MiB chunk unreadable (the array's data, not descriptors).
type damagedChunks struct{ carryover.CheckpointStore }

func (d damagedChunks) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	out, err := d.CheckpointStore.ReadChunk(ctx, hash, buf)
	if err == nil && len(out)-len(buf) == 1<<20 {
		return buf, errors.New("chunk damaged (test)")
	}
	return out, err
}

// TestLazyRestoreDamagedChunkKillsNotZeros: a chunk the fill cannot read has the kernel that touches
// it killed, instead of reading zeros where the data was or waiting for ever.
func TestLazyRestoreDamagedChunkKillsNotZeros(t *testing.T) {
	ctx := context.Background()
	c, ws, _, k := lazySaved(t, "lzd", "import numpy as np\nbig = np.random.default_rng(6).random(1 << 20)")
	c.Store = damagedChunks{c.Store}
	rr, err := c.RestoreIntoNew(ctx, k, "lzd", ws)
	if err != nil || rr.Timings.LazyBytes != 8<<20 {
		t.Fatalf("restore: %v %+v", err, rr)
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := k.Eval(tctx, "", "float(big.sum())")
	if err == nil {
		t.Fatalf("the array was read from damaged chunks: %s", got)
	}
	select {
	case <-k.Dead():
	case <-time.After(20 * time.Second):
		t.Fatalf("the kernel touching a damaged chunk lives on (eval: %v)", err)
	}
}

// TestLazyRestoreFallsBack: a kernel that cannot map lazily (here its lazy_map fails) is restored
// eagerly, says why in lazy_off, and the values are equal; Restore (into a kernel that ran user
// code) is never lazy.
func TestLazyRestoreFallsBack(t *testing.T) {
	ctx := context.Background()
	c, ws, spool, k := lazySaved(t, "lzf", "import numpy as np\nbig = np.random.default_rng(7).random(1 << 20)\ns = float(big.sum())")
	if _, err := k.Eval(ctx, "import carryover_agent.lazy as L\ndef _no(agent, a):\n    raise OSError('no userfaultfd here')\nL.op_lazy_map = _no", "1"); err != nil {
		t.Fatal(err)
	}
	rr, err := c.RestoreIntoNew(ctx, k, "lzf", ws)
	if err != nil || len(rr.Failed) != 0 || rr.Timings.LazyBytes != 0 || !strings.Contains(rr.Timings.LazyOff, "no userfaultfd here") {
		t.Fatalf("restore: %v %+v", err, rr)
	}
	if got := eval(t, k, "float(big.sum()) == s"); got != "True" {
		t.Fatalf("eager fallback: equal %s", got)
	}
	killKernel(t, k)
	k = agentKernel(t, c, ws, spool)
	if rr, err := c.Restore(ctx, k, "lzf", "", ws, false); err != nil || rr.Timings.LazyBytes != 0 || rr.Timings.LazyOff != "" {
		t.Fatalf("Restore: %v %+v", err, rr)
	}
}

// TestLazyRestoreOutlivesTheServersDescriptor: the server's userfaultfd closed mid-fill (what its
// kill -9 does) leaves a thread waiting on an unfilled page waiting, because the holder keeps a
// duplicate until the kernel exits; it never reads zeros. Then the kernel is killed, as the
// server's death kills it.
func TestLazyRestoreOutlivesTheServersDescriptor(t *testing.T) {
	ctx := context.Background()
	c, ws, _, k := lazySaved(t, "lzh", "import numpy as np\nbig = np.random.default_rng(8).random(1 << 20)")
	release := persistence.SetLazyHold()
	defer release()
	answer := persistence.SetLazyDeaf()
	defer answer()
	if rr, err := c.RestoreIntoNew(ctx, k, "lzh", ws); err != nil || rr.Timings.LazyBytes != 8<<20 {
		t.Fatalf("restore: %v %+v", err, rr)
	}
	got := make(chan string, 1)
	go func() {
		s, err := k.Eval(ctx, "", "float(big.sum())")
		got <- fmt.Sprintf("%s %v", s, err)
	}()
	time.Sleep(300 * time.Millisecond) // the thread is waiting on its first page
	persistence.StopLazyFills()
	select {
	case s := <-got:
		t.Fatalf("the kernel went on after the server's userfaultfd was closed mid-fill: %s", s)
	case <-time.After(1500 * time.Millisecond):
	}
	killKernel(t, k)
	if s := <-got; !strings.Contains(s, "kernel") {
		t.Fatalf("eval of a killed kernel: %s", s)
	}
}

// TestLazyRestoreKernelGoneMidCopy: a kernel that exits while a chunk is between its read and its
// copy (a session hibernated right after its wake) ends the fill quietly. The copy then fails on the
// closed userfaultfd; that is no damage (it was logged as "a buffer could not be filled").
func TestLazyRestoreKernelGoneMidCopy(t *testing.T) {
	ctx := context.Background()
	c, ws, _, k := lazySaved(t, "lzg", "import numpy as np\nbig = np.random.default_rng(9).random(1 << 20)")
	reached, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer persistence.SetLazyBeforeCopy(func() {
		once.Do(func() {
			close(reached)
			<-proceed
		})
	})()
	ended := make(chan error, 1)
	defer persistence.SetLazyEnded(func(err error) { ended <- err })()
	if rr, err := c.RestoreIntoNew(ctx, k, "lzg", ws); err != nil || rr.Timings.LazyBytes != 8<<20 {
		t.Fatalf("restore: %v %+v", err, rr)
	}
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("no chunk was read")
	}
	killKernel(t, k)
	for deadline := time.Now().Add(30 * time.Second); persistence.LazyFillsRunning() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fill did not end with its kernel")
		}
	}
	close(proceed)
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the fill of an exited kernel reported damage: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the fill's workers did not end")
	}
}

// lazySaved is what a wake finds: session id's checkpoint of what code made (buffers from 1 MiB are
// lazy for the test), its kernel killed, and a new kernel to restore into, on a lazy checkpointer.
func lazySaved(t *testing.T, id, code string) (c *persistence.Checkpointer, ws, spool string, k *kernel.Kernel) {
	t.Helper()
	t.Cleanup(persistence.SetLazyBufferMin(1 << 20))
	c, ws, spool = kernelSession(t, id)
	c.Lazy = true
	k = agentKernel(t, c, ws, spool)
	run(t, k, code)
	if _, err := c.Checkpoint(context.Background(), k, id, 1, ws); err != nil {
		t.Fatal(err)
	}
	killKernel(t, k)
	return c, ws, spool, agentKernel(t, c, ws, spool)
}

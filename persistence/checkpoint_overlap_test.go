package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// heldChunks is the store with reads of its 1 MiB chunks (an array's data, not descriptors or a
// small pickle) held until release, or failed when fail is set.
type heldChunks struct {
	carryover.CheckpointStore
	gate    chan struct{}
	fail    bool
	started sync.Once
	reached chan struct{} // closed at the first held read
}

func holdChunks(s carryover.CheckpointStore) *heldChunks {
	return &heldChunks{CheckpointStore: s, gate: make(chan struct{}), reached: make(chan struct{})}
}

// hold holds the read of a chunk of n bytes when it is 1 MiB.
func (h *heldChunks) hold(ctx context.Context, n int) error {
	if n != 1<<20 {
		return nil
	}
	h.started.Do(func() { close(h.reached) })
	select {
	case <-h.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	if h.fail {
		return errors.New("chunk damaged (test)")
	}
	return nil
}

func (h *heldChunks) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	out, err := h.CheckpointStore.ReadChunk(ctx, hash, buf)
	if err == nil {
		err = h.hold(ctx, len(out)-len(buf))
	}
	if err != nil {
		return buf, err
	}
	return out, nil
}

func (h *heldChunks) ReadChunkTo(ctx context.Context, hash string, w io.Writer) (int64, error) {
	b, err := h.ReadChunk(ctx, hash, nil)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// overlapCells make an array of 1 MiB chunks (held by heldChunks) and records whose pickle stream
// is a spool file of its own (over 64 KiB, under 1 MiB), the last of them a Mark: unpickled, it
// creates the file it names, which tells the test the records were loaded.
const overlapCells = "import numpy as np\n" +
	"big = np.random.default_rng(3).random(1 << 20)\n" +
	"class Mark:\n" +
	"    def __init__(self, path): self.path = path\n" +
	"    def __setstate__(self, st):\n" +
	"        self.__dict__.update(st)\n" +
	"        open(self.path, 'w').close()\n" +
	"records = [{'id': i, 'tags': ['a', str(i %% 7)], 'geo': {'lat': i / 3}} for i in range(5000)] + [Mark(%q)]\n" +
	"import hashlib\n" +
	"digest = lambda: (float(big.sum()), hashlib.sha256(repr(records[:-1]).encode()).hexdigest())"

// TestRestoreIntoNewLoadsWhileAssembling: into a new kernel, the agent loads a group whose files are
// whole (the records' pickle stream, assembled first) while an array's chunks are still being read,
// and the restore then finishes equal; a restore into a live kernel still reads every chunk first.
func TestRestoreIntoNewLoadsWhileAssembling(t *testing.T) {
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "ov")
	k := agentKernel(t, c, ws, spool)
	mark := filepath.Join(t.TempDir(), "records-loaded")
	run(t, k, fmt.Sprintf(overlapCells, mark))
	want := eval(t, k, "digest()")
	if _, err := c.Checkpoint(ctx, k, "ov", 1, ws); err != nil {
		t.Fatal(err)
	}
	killKernel(t, k)
	k = agentKernel(t, c, ws, spool)
	held := holdChunks(c.Store)
	c.Store = held
	type result struct {
		rr  *carryover.RestoreResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		rr, err := c.RestoreIntoNew(ctx, k, "ov", ws)
		done <- result{rr, err}
	}()
	<-held.reached
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(deadline) {
			close(held.gate)
			t.Fatalf("the agent did not load the records while the array's chunks were held (restore: %+v)", <-done)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Let the array go once the agent waits for it (its main thread asleep in the wait's pause,
	// after the records): let go earlier, the array could be whole before the agent looks for it.
	for !asleep(k.PID()) {
		if time.Now().After(deadline) {
			close(held.gate)
			t.Fatalf("the agent never waited for the held array (restore: %+v)", <-done)
		}
		time.Sleep(time.Millisecond)
	}
	close(held.gate)
	r := <-done
	if r.err != nil || len(r.rr.Failed) != 0 {
		t.Fatalf("restore: %v %+v", r.err, r.rr)
	}
	if r.rr.Timings.WaitMS <= 0 {
		t.Errorf("wait_ms %v: the load waited for the held array, and says it did not", r.rr.Timings.WaitMS)
	}
	if got := eval(t, k, "digest()"); got != want {
		t.Fatalf("after the restore (array sum, records digest): %s, want %s", got, want)
	}
	// Into a live kernel nothing is loaded before every chunk is read: held reads, no mark.
	os.Remove(mark)
	held = holdChunks(held.CheckpointStore)
	c.Store = held
	go func() {
		rr, err := c.Restore(ctx, k, "ov", "", ws, false)
		done <- result{rr, err}
	}()
	<-held.reached
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(mark); err == nil {
		t.Error("a restore into a live kernel loaded the records before the array's chunks were read")
	}
	close(held.gate)
	if r := <-done; r.err != nil || len(r.rr.Failed) != 0 {
		t.Fatalf("restore into the live kernel: %v %+v", r.err, r.rr)
	}
	if got := eval(t, k, "digest()"); got != want {
		t.Fatalf("after the live restore: %s, want %s", got, want)
	}
}

// asleep: process pid's main thread sleeps in nanosleep (during a restore, only the agent's wait
// for files does: arrivals.py).
func asleep(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/wchan", pid, pid))
	return err == nil && strings.Contains(string(b), "nanosleep")
}

// TestRestoreIntoNewFailsWhileLoading: a chunk that cannot be read while the agent loads fails the
// restore with the store's error (not a hang, not a half-restored success), and the kernel is free
// at once; a restore given up (its context done) while the agent waits leaves the kernel free too.
func TestRestoreIntoNewFailsWhileLoading(t *testing.T) {
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "ovf")
	k := agentKernel(t, c, ws, spool)
	run(t, k, fmt.Sprintf(overlapCells, filepath.Join(t.TempDir(), "mark")))
	if _, err := c.Checkpoint(ctx, k, "ovf", 1, ws); err != nil {
		t.Fatal(err)
	}
	store := c.Store
	for _, how := range []string{"damaged", "given up"} {
		killKernel(t, k)
		k = agentKernel(t, c, ws, spool)
		held := holdChunks(store)
		c.Store = held
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		go func() {
			<-held.reached
			time.Sleep(100 * time.Millisecond) // the agent waits for the array's file by now
			if how == "damaged" {
				held.fail = true
				close(held.gate)
			} else {
				cancel()
			}
		}()
		_, err := c.RestoreIntoNew(rctx, k, "ovf", ws)
		cancel()
		want := map[string]string{"damaged": "chunk damaged (test)", "given up": "context canceled"}[how]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: restore error %v, want one naming %q", how, err, want)
		}
		if how == "given up" {
			close(held.gate)
		}
		ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := k.Eval(ectx, "", "1 + 1")
		ecancel()
		if err != nil || got != "2" {
			t.Fatalf("%s: the kernel after the failed restore: %q %v (the agent still waits?)", how, got, err)
		}
		if dirs, _ := filepath.Glob(filepath.Join(spool, "r-*")); len(dirs) != 0 {
			t.Fatalf("%s: spool dirs left: %v", how, dirs)
		}
	}
	c.Store = store
	killKernel(t, k)
	k = agentKernel(t, c, ws, spool)
	if rr, err := c.RestoreIntoNew(ctx, k, "ovf", ws); err != nil || len(rr.Failed) != 0 {
		t.Fatalf("the checkpoint after the failed restores: %v %+v", err, rr)
	}
	if _, err := os.Stat(spool); err != nil {
		t.Fatal(err)
	}
}

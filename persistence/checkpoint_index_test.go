package persistence_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/carryover/carryover/persistence"
)

// TestIndexedBufferThroughServer: a buffer of more than 64 chunks is described through index chunks
// (the descriptor lists them, not its 196 chunks). A turn that writes one element writes one data
// chunk and one index chunk; the array comes back equal after SIGKILL, and GroupChunks lists every
// chunk, in order.
func TestIndexedBufferThroughServer(t *testing.T) {
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "ix")
	c.ChunkSize = 4096 // 800 KB: 196 chunks
	k := agentKernel(t, c, ws, spool)
	run(t, k, "import numpy as np\na = np.arange(100_000, dtype=np.float64)")
	if _, err := c.Checkpoint(ctx, k, "ix", 1, ws); err != nil {
		t.Fatal(err)
	}
	run(t, k, "a[50_000] = -1.0")
	res, err := c.Checkpoint(ctx, k, "ix", 2, ws)
	if err != nil {
		t.Fatal(err)
	}
	if res.BytesWritten > 12<<10 {
		t.Errorf("one element written: %d bytes stored, want a 4 KiB chunk, an index chunk and a descriptor", res.BytesWritten)
	}
	ref := groupRef(t, c, "ix", "a")
	raw, err := c.Store.ReadChunk(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	var desc struct {
		B [][]json.RawMessage `json:"b"`
	}
	if err := json.Unmarshal(raw, &desc); err != nil {
		t.Fatal(err)
	}
	if len(desc.B) != 1 || len(desc.B[0]) != 4 || string(desc.B[0][2]) != "[]" {
		t.Fatalf("descriptor buffers %.300s...: want one buffer listing index chunks", raw)
	}
	var index [][2]any
	if err := json.Unmarshal(desc.B[0][3], &index); err != nil || len(index) != 4 {
		t.Fatalf("index chunks %s (%v): want 4 (196 chunks, 64 each)", desc.B[0][3], err)
	}
	chunks, err := persistence.GroupChunks(ctx, c.Store, ref)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(chunks); n < 197 || n > 198 { // the pickle stream, then the buffer's 196
		t.Errorf("GroupChunks: %d chunks", n)
	}
	if slices.Contains(chunks, index[0][0].(string)) {
		t.Error("GroupChunks lists an index chunk")
	}

	killKernel(t, k)
	k = agentKernel(t, c, ws, spool)
	rr, err := c.Restore(ctx, k, "ix", "", ws, true)
	if err != nil || len(rr.Failed) != 0 {
		t.Fatalf("restore: %v %+v", err, rr)
	}
	want := "(-1.0, 99999.0, 4999899999.0)"
	if got := eval(t, k, "(float(a[50_000]), float(a[-1]), float(a.sum()))"); got != want {
		t.Fatalf("restored a: %s, want %s", got, want)
	}
	run(t, k, "a[7] = 0.5")
	res, err = c.Checkpoint(ctx, k, "ix", 3, ws)
	if err != nil {
		t.Fatal(err)
	}
	if res.BytesWritten > 12<<10 {
		t.Errorf("one element written after a restore: %d bytes stored", res.BytesWritten)
	}
}

// groupRef is the descriptor ref of the group holding name in the session's latest checkpoint.
func groupRef(t *testing.T, c *persistence.Checkpointer, session, name string) string {
	t.Helper()
	cp, err := c.Store.LatestCheckpoint(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	m, err := persistence.ParseManifest(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range m.Groups {
		if slices.Contains(g.Names, name) {
			return g.Ref
		}
	}
	t.Fatalf("no group holds %s", name)
	return ""
}

// TestManySlicesThroughServer: a container of more than 64 slices is described through index chunks
// of its buffer list; through Go's restore (which expands them) it comes back equal after SIGKILL, and
// the restored agent, seeded from the expanded descriptor, re-pickles one slice for the next change.
func TestManySlicesThroughServer(t *testing.T) {
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "ms")
	k := agentKernel(t, c, ws, spool)
	run(t, k, "recs = [{'id': i, 'name': str(i), 'ok': i % 2 == 0} for i in range(250_000)]")
	if _, err := c.Checkpoint(ctx, k, "ms", 1, ws); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Store.ReadChunk(ctx, groupRef(t, c, "ms", "recs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var desc struct {
		B  []json.RawMessage `json:"b"`
		BX [][2]any          `json:"bx"`
	}
	if err := json.Unmarshal(raw, &desc); err != nil || len(desc.B) != 0 || len(desc.BX) < 2 {
		t.Fatalf("descriptor %.300s (%v): want its slices listed in index chunks", raw, err)
	}
	run(t, k, "recs[70_000]['name'] = 'x'")
	probe := "(recs[70_000]['name'], recs[-1], len(recs))"
	live := eval(t, k, probe)
	if _, err := c.Checkpoint(ctx, k, "ms", 2, ws); err != nil {
		t.Fatal(err)
	}
	killKernel(t, k)
	k = agentKernel(t, c, ws, spool)
	if rr, err := c.Restore(ctx, k, "ms", "", ws, true); err != nil || len(rr.Failed) != 0 {
		t.Fatalf("restore: %v %+v", err, rr)
	}
	if got := eval(t, k, probe); got != live {
		t.Fatalf("restored %s, live %s", got, live)
	}
	run(t, k, "recs[3]['ok'] = None")
	res, err := c.Checkpoint(ctx, k, "ms", 3, ws)
	if err != nil {
		t.Fatal(err)
	}
	if tm := res.Timings; tm.SlicedRepickledBytes == 0 || tm.SlicedRepickledBytes*20 > tm.SlicedBytes {
		t.Errorf("after the restore, one record changed re-pickled %d of %d bytes", tm.SlicedRepickledBytes, tm.SlicedBytes)
	}
}

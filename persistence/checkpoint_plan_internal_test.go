package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// slowReader is a ChunkReader with a round trip per read (a remote store), counting the reads in
// flight at once.
type slowReader struct {
	carryover.ChunkReader
	inFlight, most atomic.Int32
}

func (r *slowReader) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	n := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	time.Sleep(5 * time.Millisecond)
	return r.ChunkReader.ReadChunk(ctx, hash, buf)
}

// TestRestorePlanReadsGroupsAtOnce: the restore's plan reads the groups' descriptors and small
// pickles several at once (each a round trip on PostgreSQL + S3), keeps each with its group in the
// manifest's order, skips imports, and names the group whose descriptor the store lacks.
func TestRestorePlanReadsGroupsAtOnce(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	w := writerT(t, st)
	put := func(raw []byte) string { return putChunkT(t, w, raw).Hash }
	var gs []ManifestGroup
	for i := 0; i < 24; i++ {
		pickle := []byte(fmt.Sprintf("pickle of v%d", i))
		desc, _ := json.Marshal(map[string]any{"v": 1, "k": "data", "n": []string{fmt.Sprintf("v%d", i)}, "f": "p",
			"p": [][]any{{put(pickle), len(pickle)}}, "b": []any{}, "d": []string{}})
		gs = append(gs, ManifestGroup{Kind: "data", Names: []string{fmt.Sprintf("v%d", i)}, Ref: put(desc)})
		if i == 3 {
			gs = append(gs, ManifestGroup{Kind: "imp", Names: []string{"numpy"}, Module: "numpy"})
		}
	}
	r := &slowReader{ChunkReader: st}
	reads, err := readGroups(ctx, r, gs)
	if err != nil {
		t.Fatal(err)
	}
	if r.most.Load() < 2 {
		t.Errorf("at most %d reads at once: the groups were read one after another", r.most.Load())
	}
	for i, g := range gs {
		if g.Kind == "imp" {
			if reads[i].desc != nil {
				t.Errorf("group %d (an import) was read", i)
			}
			continue
		}
		if reads[i].inline == nil || string(*reads[i].inline) != "pickle of "+g.Names[0] {
			t.Fatalf("group %d (%s): inline pickle %v", i, g.Names[0], reads[i].inline)
		}
		if reads[i].desc.Names[0] != g.Names[0] {
			t.Fatalf("group %d holds the descriptor of %v", i, reads[i].desc.Names)
		}
	}
	gs[7].Ref = strings.Repeat("0", len(gs[7].Ref))
	if _, err := readGroups(ctx, r, gs); err == nil || !strings.Contains(err.Error(), gs[7].Names[0]) {
		t.Fatalf("a group whose descriptor is missing: %v; want an error naming %s", err, gs[7].Names[0])
	}
}

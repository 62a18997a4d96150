package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
)

// BenchmarkExportImport100MB: Write and Read of a checkpoint holding one 100 MiB buffer of random
// floats in 1 MiB chunks, SQLite to SQLite (go test -bench ExportImport ./persistence/archive/).
func BenchmarkExportImport100MB(b *testing.B) {
	ctx := context.Background()
	src := openSQLite(b, "s")
	w, _ := src.BeginCheckpoint(ctx)
	bl := &builder{t: b, w: w, rnd: rand.New(rand.NewPCG(1, 2))}
	var pairsL [][2]any
	var hs []string
	for i := 0; i < 100; i++ {
		d := make([]byte, 1<<20)
		for j := 0; j < len(d); j += 8 {
			v := bl.rnd.Uint64()
			for k := 0; k < 8; k++ {
				d[j+k] = byte(v >> (8 * k))
			}
		}
		h := bl.put(d)
		hs = append(hs, h)
		pairsL = append(pairsL, [2]any{h, len(d)})
	}
	var ix [][2]any
	var ixh []string
	for i := 0; i < len(pairsL); i += 64 {
		j, _ := json.Marshal(pairsL[i:min(i+64, len(pairsL))])
		h := bl.put(j, hs[i:min(i+64, len(hs))]...)
		ix = append(ix, [2]any{h, len(pairsL[i:min(i+64, len(pairsL))]) << 20})
		ixh = append(ixh, h)
	}
	desc, _ := json.Marshal(map[string]any{"v": 1, "k": "data", "n": []string{"a"}, "f": "p5", "p": [][2]any{}, "b": []any{[]any{0, 100 << 20, []any{}, ix}}, "d": []string{}})
	ref := bl.put(desc, ixh...)
	m := persistence.Manifest{V: 1, Groups: []persistence.ManifestGroup{{Kind: "data", Names: []string{"a"}, Ref: ref}}}
	doc, _ := json.Marshal(m)
	if err := w.Commit(ctx, carryover.Checkpoint{ID: "c", SessionID: "s", Manifest: doc, Roots: rootHashes(&m)}); err != nil {
		b.Fatal(err)
	}
	w.Close()
	cp, _ := src.GetCheckpoint(ctx, "s", "c")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var buf bytes.Buffer
		if _, err := Write(ctx, &buf, Export{Store: src, Checkpoint: cp}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		dst := openSQLite(b)
		s, err := Read(ctx, io.Reader(&buf), dst, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		b.Logf("write %v, read %v", t1.Sub(t0), time.Since(t1))
	}
}

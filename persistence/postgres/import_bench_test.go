package postgres

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/archive"
	"github.com/carryover/carryover/persistence/chunk"
)

// genReader is a checkpoint of one variable whose buffer is n data chunks of size bytes, made on
// demand, so the benchmark's archive costs no store of its own.
type genReader struct {
	carryover.ChunkReader
	base  []byte
	data  map[string]int
	small map[string][]byte
}

func (g *genReader) gen(i int, buf []byte) []byte {
	buf = append(buf, g.base...)
	binary.LittleEndian.PutUint64(buf[len(buf)-len(g.base):], uint64(i))
	return buf
}

func (g *genReader) ReadChunk(_ context.Context, h string, buf []byte) ([]byte, error) {
	if b, ok := g.small[h]; ok {
		return append(buf, b...), nil
	}
	return g.gen(g.data[h], buf), nil
}

func genCheckpoint(n, size int) (*genReader, carryover.Checkpoint) {
	g := &genReader{base: make([]byte, size), data: map[string]int{}, small: map[string][]byte{}}
	rand.NewChaCha8([32]byte{byte(time.Now().UnixNano())}).Read(g.base)
	var pairs [][2]any
	for i := range n {
		h := chunk.Hash(g.gen(i, nil))
		g.data[h] = i
		pairs = append(pairs, [2]any{h, size})
	}
	put := func(b []byte) string { h := chunk.Hash(b); g.small[h] = b; return h }
	ij, _ := json.Marshal(pairs)
	ih := put(ij)
	pk := []byte("a pickle of 300 bytes, or so")
	ph := put(pk)
	total := n * size
	dj, _ := json.Marshal(map[string]any{"v": 1, "k": "data", "n": []string{"big"}, "f": "p5", "p": [][2]any{{ph, len(pk)}},
		"b": []any{[]any{0, total, []any{}, [][2]any{{ih, total}}}}, "d": []string{}})
	m := persistence.Manifest{V: 1, Groups: []persistence.ManifestGroup{{Kind: "data", Names: []string{"big"}, Ref: put(dj)}}}
	doc, _ := json.Marshal(m)
	var roots []string
	for _, gr := range m.Groups {
		roots = append(roots, gr.Ref)
	}
	return g, carryover.Checkpoint{ID: archive.NewCheckpointID(), SessionID: "s1", Turn: 1, Manifest: doc, Roots: roots}
}

// BenchmarkImportObjects: the import (archive.Read, not its commit) of an archive of
// CARRYOVER_BENCH_MIB (default 256) MiB of incompressible chunks of CARRYOVER_BENCH_CHUNK_KIB (1024)
// into PostgreSQL + S3, a fresh database and bucket per round: the profile of the portable bench's
// 1 GiB row without its servers (go test -run X -bench ImportObjects -cpuprofile ...). Its figures
// are not claims; make bench's are.
func BenchmarkImportObjects(b *testing.B) {
	mib := 256
	if v := os.Getenv("CARRYOVER_BENCH_MIB"); v != "" {
		json.Unmarshal([]byte(v), &mib)
	}
	kib := 1024
	if v := os.Getenv("CARRYOVER_BENCH_CHUNK_KIB"); v != "" {
		json.Unmarshal([]byte(v), &kib)
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		g, cp := genCheckpoint(mib*1024/kib, kib<<10)
		file := filepath.Join(b.TempDir(), "a.tar")
		f, _ := os.Create(file)
		bw := bufio.NewWriterSize(f, 1<<20)
		if _, err := archive.Write(ctx, bw, archive.Export{Store: g, Checkpoint: cp, SessionID: "s1", Producer: "bench"}); err != nil {
			b.Fatal(err)
		}
		bw.Flush()
		f.Close()
		s := storeT(b, Options{Objects: bucketT(b, ""), CacheDir: b.TempDir()})
		in, _ := os.Open(file)
		b.StartTimer()
		t0 := time.Now()
		st, err := archive.Read(ctx, bufio.NewReaderSize(in, 1<<20), s, archive.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		st.Close()
		b.ReportMetric(float64(mib)/time.Since(t0).Seconds(), "MiB/s")
		in.Close()
	}
}

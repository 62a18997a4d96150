package archive

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/chunk"
)

// genStore is a checkpoint of one variable whose buffer is n data chunks of size bytes each, made on
// demand (a random base with the chunk's number in front), so a test can stream far more than it
// keeps: only the structural chunks are held.
type genStore struct {
	carryover.ChunkReader // unused methods
	base                  []byte
	data                  map[string]int    // data chunk hash -> its number
	small                 map[string][]byte // descriptor, pickle, index chunk
}

func (g *genStore) gen(i int, buf []byte) []byte {
	buf = append(buf, g.base...)
	binary.LittleEndian.PutUint64(buf[len(buf)-len(g.base):], uint64(i))
	return buf
}

func (g *genStore) ReadChunk(_ context.Context, h string, buf []byte) ([]byte, error) {
	if b, ok := g.small[h]; ok {
		return append(buf, b...), nil
	}
	i, ok := g.data[h]
	if !ok {
		return buf, carryover.Errorf(carryover.CodeNotFound, "chunk %s", h)
	}
	return g.gen(i, buf), nil
}

func (g *genStore) ReadStoredChunk(ctx context.Context, h string, buf []byte) (string, int64, []byte, error) {
	out, err := g.ReadChunk(ctx, h, buf)
	return chunk.CodecRaw, int64(len(out) - len(buf)), out, err
}

// newGenStore makes the store and the checkpoint's manifest.
func newGenStore(t testing.TB, n, size int) (*genStore, carryover.Checkpoint) {
	g := &genStore{base: make([]byte, size), data: map[string]int{}, small: map[string][]byte{}}
	rand.NewChaCha8([32]byte{1}).Read(g.base)
	var pairs [][2]any
	for i := range n {
		h := chunk.Hash(g.gen(i, nil))
		g.data[h] = i
		pairs = append(pairs, [2]any{h, size})
	}
	put := func(b []byte) string {
		h := chunk.Hash(b)
		g.small[h] = b
		return h
	}
	ij, _ := json.Marshal(pairs)
	ih := put(ij)
	pk := []byte("a pickle of 300 bytes, or so")
	ph := put(pk)
	total := n * size
	dj, _ := json.Marshal(map[string]any{"v": 1, "k": "data", "n": []string{"big"}, "f": "p5", "p": [][2]any{{ph, len(pk)}},
		"b": []any{[]any{0, total, []any{}, [][2]any{{ih, total}}}}, "d": []string{}})
	m := persistence.Manifest{V: 1, Groups: []persistence.ManifestGroup{{Kind: "data", Names: []string{"big"}, Ref: put(dj)}}}
	doc, _ := json.Marshal(m)
	return g, carryover.Checkpoint{ID: NewCheckpointID(), SessionID: "s1", Turn: 1, Manifest: doc, Roots: rootHashes(&m)}
}

// sinkStore takes an import's chunks and keeps none of them; at each put it measures the live heap
// (after a collection), the figure the streaming test bounds.
type sinkStore struct {
	carryover.CheckpointStore // unused methods
	mu                        sync.Mutex
	puts                      int
	chunks                    int
	peak                      uint64
}

func (s *sinkStore) MissingChunks(_ context.Context, hs []string) ([]string, error) { return hs, nil }

func (s *sinkStore) BeginCheckpoint(context.Context) (carryover.CheckpointWriter, error) {
	return &sinkWriter{s: s}, nil
}

type sinkWriter struct {
	carryover.CheckpointWriter // unused methods
	s                          *sinkStore
}

func (w *sinkWriter) PutChunks(_ context.Context, cs []carryover.ChunkInput) (int64, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.puts++
	w.s.chunks += len(cs)
	w.s.peak = max(w.s.peak, ms.HeapAlloc)
	var n int64
	for _, c := range cs {
		n += int64(len(c.Data))
	}
	return n, nil
}

func (w *sinkWriter) Close() {}

// TestExportImportStreams: 256 MiB exported through a pipe into an import, both in this process.
// The live heap at every put of the import (the export running at the same time) stays within
// what the two hold by design, whatever the archive's size: the export's chunks in flight
// (readAhead + 2), the import's two batches and its two chunk buffers, plus 16 MiB of slack; 80 MiB
// here, under a third of what went through. Not parallel: it reads the process's heap, which
// other tests would share.
func TestExportImportStreams(t *testing.T) {
	const n, size = 64, 4 << 20
	src, cp := newGenStore(t, n, size)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	pr, pw := io.Pipe()
	go func() {
		_, err := Write(context.Background(), pw, Export{Store: src, Checkpoint: cp, SessionID: "s1", Producer: "test"})
		pw.CloseWithError(err)
	}()
	sink := &sinkStore{}
	st, err := Read(context.Background(), pr, sink, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st.Stats.RawBytes < n*size || sink.chunks < n {
		t.Fatalf("imported %d raw bytes and put %d chunks; want %d and at least %d", st.Stats.RawBytes, sink.chunks, n*size, n)
	}
	if sink.puts < 4 {
		t.Fatalf("%d puts: the import did not put as it read", sink.puts)
	}
	bound := int64((readAhead+2)*size + 2*putBatchBytes + 2*size + 16<<20)
	if grew := int64(sink.peak) - int64(base); grew > bound {
		t.Fatalf("the live heap grew by %d MiB while %d MiB streamed through (bound %d MiB)", grew>>20, n*size>>20, bound>>20)
	} else {
		t.Logf("live heap grew by at most %d MiB over %d puts while %d MiB streamed", grew>>20, sink.puts, n*size>>20)
	}
}

package persistence

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/carryover/carryover"
)

// watchedReader checks, before every chunk it reads, that each file at its final path is whole
// (its bytes those expected).
type watchedReader struct {
	carryover.ChunkReader
	t    *testing.T
	want map[string][]byte
	mu   sync.Mutex
}

func (w *watchedReader) look() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for path, want := range w.want {
		if got, err := os.ReadFile(path); err == nil && !bytes.Equal(got, want) {
			w.t.Errorf("%s is at its path with %d bytes that differ from the %d expected", filepath.Base(path), len(got), len(want))
		}
	}
}

func (w *watchedReader) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	w.look()
	return w.ChunkReader.ReadChunk(ctx, hash, buf)
}

func (w *watchedReader) ReadChunkTo(ctx context.Context, hash string, wr io.Writer) (int64, error) {
	w.look()
	return w.ChunkReader.ReadChunkTo(ctx, hash, wr)
}

// TestAssemblyPublishesWholeFilesInRankOrder: files are taken in rank order (the order of the
// agent's loads) whatever the jobs' order; a file is at its path only once whole (the agent,
// loading while the assembly runs, opens what it finds), an empty one at once; none is left under
// its temporary name.
func TestAssemblyPublishesWholeFilesInRankOrder(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	w := writerT(t, st)
	dir := t.TempDir()
	var (
		jobs []assembleJob
		want = map[string][]byte{}
	)
	for i, rank := range []int{rankBuffer, rankPickle, rankFirst, rankBuffer, rankPickle} {
		cs, raws := putRandomChunks(t, w, 3+i, 2000)
		path := filepath.Join(dir, fmt.Sprintf("f%d-rank%d", i, rank))
		jobs = append(jobs, assembleJob{path: path, chunks: cs, size: int64(2000 * len(cs)), rank: rank})
		want[path] = bytes.Join(raws, nil)
	}
	empty := filepath.Join(dir, "empty")
	jobs = append(jobs, assembleJob{path: empty, rank: rankFirst})
	want[empty] = []byte{}
	pieces, files, err := openAssembly(jobs)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	var started []string // the files in the order their first pieces are taken
	for _, p := range pieces {
		if name := filepath.Base(p.f.path); !slices.Contains(started, name) {
			started = append(started, name)
		}
	}
	if got := fmt.Sprint(started); got != "[f2-rank0 f1-rank1 f4-rank1 f0-rank2 f3-rank2]" {
		t.Errorf("files taken in the order %s", got)
	}
	wr := &watchedReader{ChunkReader: st, t: t, want: want}
	if err := runAssembly(ctx, wr, jobs); err != nil {
		t.Fatal(err)
	}
	for path, b := range want {
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %d bytes (%v), want %d", filepath.Base(path), len(got), err, len(b))
		}
	}
	if parts, _ := filepath.Glob(filepath.Join(dir, "*"+partSuffix)); len(parts) != 0 {
		t.Fatalf("left under temporary names: %v", parts)
	}
}

// TestInTurns: pieces alternate between width files at a time, a finished file's place taken by
// the next.
func TestInTurns(t *testing.T) {
	f := func(name string, n int) []piece {
		var ps []piece
		for i := range n {
			ps = append(ps, piece{hash: fmt.Sprintf("%s%d", name, i)})
		}
		return ps
	}
	var got []string
	for _, p := range inTurns([][]piece{f("a", 3), f("b", 1), nil, f("c", 2)}, 2) {
		got = append(got, p.hash)
	}
	if s := fmt.Sprint(got); s != "[a0 b0 a1 c0 a2 c1]" {
		t.Fatalf("order %s", s)
	}
}

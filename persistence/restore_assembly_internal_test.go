package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
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

// blockedReader holds every read until its context is done.
type blockedReader struct{ carryover.ChunkReader }

func (blockedReader) ReadChunk(ctx context.Context, _ string, buf []byte) ([]byte, error) {
	<-ctx.Done()
	return buf, ctx.Err()
}

func (blockedReader) ReadChunkTo(ctx context.Context, _ string, _ io.Writer) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestAssembleWhileLoadingErrors: a failed assembly reaches a load waiting for its files (by the
// mark, or, when the mark cannot be written, by the spool dir's removal) and its error is the one
// returned; a load deaf to both is given up after abortGrace; a load failing on its own stops the
// assembly and its error is returned.
func TestAssembleWhileLoadingErrors(t *testing.T) {
	defer func(g time.Duration) { abortGrace = g }(abortGrace)
	ctx := context.Background()
	st := storeT(t)
	missing := descChunk{Hash: chunk.Hash([]byte("never stored")), Len: 12}
	// waitFor is a load that fails once cond holds (the agent's look for the mark or the dir).
	waitFor := func(cond func() bool) func(context.Context) error {
		return func(ctx context.Context) error {
			for !cond() {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Millisecond):
				}
			}
			return errors.New("agent: the restore's files could not be read")
		}
	}
	for _, how := range []string{"mark", "no mark", "deaf"} {
		dir := t.TempDir()
		jobs := []assembleJob{{path: filepath.Join(dir, "g0.p"), chunks: []descChunk{missing}, size: 12}}
		load := waitFor(func() bool { _, err := os.Stat(filepath.Join(dir, abortMark)); return err == nil })
		abortGrace = 30 * time.Second // the load must see the failure itself, well before
		switch how {
		case "no mark":
			if err := os.Mkdir(filepath.Join(dir, abortMark), 0o700); err != nil { // the mark cannot be written
				t.Fatal(err)
			}
			load = waitFor(func() bool { _, err := os.Stat(dir); return err != nil })
		case "deaf":
			load = waitFor(func() bool { return false })
			abortGrace = 200 * time.Millisecond
		}
		start := time.Now()
		_, err := assembleWhileLoading(ctx, st, jobs, dir, load)
		if err == nil || !strings.Contains(err.Error(), "assemble") {
			t.Fatalf("%s: error %v, want the assembly's", how, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("%s: returned after %v", how, took)
		}
	}
	dir := t.TempDir()
	jobs := []assembleJob{{path: filepath.Join(dir, "g0.p"), chunks: []descChunk{missing}, size: 12}}
	_, err := assembleWhileLoading(ctx, blockedReader{st}, jobs, dir, func(context.Context) error { return errors.New("kernel died") })
	if err == nil || err.Error() != "kernel died" {
		t.Fatalf("a load failing on its own: %v, want its error", err)
	}
}

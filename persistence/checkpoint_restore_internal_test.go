package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// TestAssemblyRepeatedChunks: a buffer whose chunks recur (zeros, np.ones) reads each chunk once and
// writes it to every place; the files come out byte for byte, beside a chunk that occurs once and
// one that recurs across two files, and a chunk the store lacks fails the assembly.
func TestAssemblyRepeatedChunks(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	w := writerT(t, st)
	put := func(raw []byte) descChunk { return putChunkT(t, w, raw) }
	ones := bytes.Repeat([]byte{1}, 64<<10)
	odd := randomBytes(t, 1000)
	a, b := put(ones), put(odd)
	dir := t.TempDir()
	jobs := []assembleJob{
		{path: filepath.Join(dir, "x"), chunks: []descChunk{a, a, b, a}, size: 3*a.Len + b.Len},
		{path: filepath.Join(dir, "y"), chunks: []descChunk{a}, size: a.Len},
	}
	if n := len(byChunk([]piece{{hash: a.Hash}, {hash: b.Hash}, {hash: a.Hash}})); n != 2 {
		t.Fatalf("byChunk: %d groups, want 2", n)
	}
	if err := runAssembly(ctx, st, jobs); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{
		jobs[0].path: bytes.Join([][]byte{ones, ones, odd, ones}, nil),
		jobs[1].path: ones,
	} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes differ from the %d expected", path, len(got), len(want))
		}
	}
	missing := descChunk{Hash: chunk.Hash([]byte("never stored")), Len: 12}
	bad := []assembleJob{{path: filepath.Join(dir, "z"), chunks: []descChunk{missing, missing}, size: 24}}
	if err := runAssembly(ctx, st, bad); err == nil {
		t.Fatal("an assembly missing a chunk succeeded")
	}
}

// TestSplitBuffer: a buffer from splitBufferMin is cut into assembleWorkers parts of about equal
// size at page-aligned chunk boundaries (a part is mapped at its offset); a smaller one, or one
// with no such boundary, stays whole; the parts hold every chunk once, in order.
func TestSplitBuffer(t *testing.T) {
	defer SetSplitBufferMin(1 << 20)()
	mib := func(n int) []descChunk {
		var cs []descChunk
		for i := range n {
			cs = append(cs, descChunk{Hash: fmt.Sprint(i), Len: 1 << 20})
		}
		return cs
	}
	total := func(cs []descChunk) (n int64) {
		for _, c := range cs {
			n += c.Len
		}
		return n
	}
	odd := append([]descChunk{{Hash: "odd", Len: 1000}}, mib(6)...) // no boundary is page-aligned
	for _, tc := range []struct {
		name   string
		chunks []descChunk
		offs   []int64
	}{
		{"under the minimum", []descChunk{{Hash: "a", Len: 4096}, {Hash: "b", Len: 4096}}, []int64{0}},
		{"even", mib(8), []int64{0, 4 << 20}},
		{"odd count", mib(7), []int64{0, 4 << 20}},
		{"one chunk", mib(1), []int64{0}},
		{"no aligned boundary", odd, []int64{0}},
		{"chunks short of the length", mib(8), []int64{0}},
	} {
		n := total(tc.chunks)
		if tc.name == "chunks short of the length" {
			n += 4096 // the descriptor says more than its chunks hold: one part, which openAssembly refuses
		}
		parts := splitBuffer(tc.chunks, n, 4096)
		if len(parts) == 1 && parts[0].size != n {
			t.Errorf("%s: one part of %d bytes, want the buffer's %d", tc.name, parts[0].size, n)
		}
		var offs []int64
		var all []descChunk
		for _, p := range parts {
			if (len(parts) > 1 && p.size != total(p.chunks)) || (len(offs) > 0 && p.off != offs[len(offs)-1]+parts[len(offs)-1].size) {
				t.Errorf("%s: part at %d: size %d, chunks %d", tc.name, p.off, p.size, total(p.chunks))
			}
			offs = append(offs, p.off)
			all = append(all, p.chunks...)
		}
		if fmt.Sprint(offs) != fmt.Sprint(tc.offs) || fmt.Sprint(all) != fmt.Sprint(tc.chunks) {
			t.Errorf("%s: parts at %v holding %d chunks, want at %v holding %d", tc.name, offs, len(all), tc.offs, len(tc.chunks))
		}
	}
}

// TestAssemblySplitParts: the first part's file has the buffer's whole size (its tail a hole the
// other parts are mapped over), the others their own bytes; the pieces alternate between files.
func TestAssemblySplitParts(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	w := writerT(t, st)
	cs, raws := putRandomChunks(t, w, 5, 8192)
	defer SetSplitBufferMin(1)()
	parts := splitBuffer(cs, 5*8192, 4096)
	if len(parts) != 2 || parts[1].off != 3*8192 {
		t.Fatalf("parts %+v", parts)
	}
	dir := t.TempDir()
	jobs := []assembleJob{
		{path: filepath.Join(dir, "b"), chunks: parts[0].chunks, size: parts[0].size, fileSize: 5 * 8192},
		{path: filepath.Join(dir, "b.p1"), chunks: parts[1].chunks, size: parts[1].size},
	}
	pieces, files, err := openAssembly(jobs)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 1, 0, 1, 0} {
		if pieces[i].f != files[want] {
			t.Fatalf("piece %d is of file %d's, want %d's: pieces do not alternate", i, 1-want, want)
		}
	}
	if err := runAssembly(ctx, st, jobs); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(jobs[0].path)
	second, _ := os.ReadFile(jobs[1].path)
	wantFirst := append(bytes.Join(raws[:3], nil), make([]byte, 2*8192)...)
	if !bytes.Equal(first, wantFirst) || !bytes.Equal(second, bytes.Join(raws[3:], nil)) {
		t.Fatalf("files of %d and %d bytes differ from the chunks", len(first), len(second))
	}
}

// cataloger is a store that looks chunks up ahead (as PostgreSQL does), counting what it was asked
// and the reads made through its readers; fail makes its look-ups fail.
type cataloger struct {
	carryover.ChunkReader
	fail     bool
	asked    [][]string
	viaAhead atomic.Int64
}

func (c *cataloger) ReaderFor(_ context.Context, hashes []string) (carryover.ChunkReader, error) {
	c.asked = append(c.asked, hashes)
	if c.fail {
		return nil, errors.New("look-up failed")
	}
	return aheadCounter{c}, nil
}

type aheadCounter struct{ c *cataloger }

func (a aheadCounter) ReadChunk(ctx context.Context, hash string, buf []byte) ([]byte, error) {
	a.c.viaAhead.Add(1)
	return a.c.ChunkReader.ReadChunk(ctx, hash, buf)
}

func (a aheadCounter) ReadChunkTo(ctx context.Context, hash string, w io.Writer) (int64, error) {
	a.c.viaAhead.Add(1)
	return a.c.ChunkReader.ReadChunkTo(ctx, hash, w)
}

func (a aheadCounter) MissingChunks(ctx context.Context, hashes []string) ([]string, error) {
	return a.c.ChunkReader.MissingChunks(ctx, hashes)
}

// TestAssemblyLooksChunksUpAhead: on a store that looks chunks up ahead, an assembly asks once for
// all its chunks and reads every one through that reader; when the look-up fails it reads through
// the store, and the files come out the same.
func TestAssemblyLooksChunksUpAhead(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	w := writerT(t, st)
	chunks, raws := putRandomChunks(t, w, 5, 3000)
	want := bytes.Join(raws, nil)
	for _, fail := range []bool{false, true} {
		cat := &cataloger{ChunkReader: st, fail: fail}
		path := filepath.Join(t.TempDir(), "b")
		if err := runAssembly(ctx, cat, []assembleJob{{path: path, chunks: chunks, size: int64(len(want))}}); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("look-up failing %v: the file differs (%v)", fail, err)
		}
		if len(cat.asked) != 1 || len(cat.asked[0]) != len(chunks) {
			t.Fatalf("look-up failing %v: asked %d times (%v), want once for the %d chunks", fail, len(cat.asked), cat.asked, len(chunks))
		}
		if reads, wantReads := cat.viaAhead.Load(), int64(len(chunks)); fail && reads != 0 || !fail && reads != wantReads {
			t.Fatalf("look-up failing %v: %d reads through the ahead reader", fail, reads)
		}
	}
}

// putRandomChunks stores n chunks of size random bytes through w and answers them as a descriptor's
// chunks, with their raw bytes.
func putRandomChunks(t *testing.T, w carryover.CheckpointWriter, n, size int) ([]descChunk, [][]byte) {
	t.Helper()
	var cs []descChunk
	var raws [][]byte
	for range n {
		raw := randomBytes(t, size)
		c, err := chunk.Encode(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.PutChunks(context.Background(), []carryover.ChunkInput{c}); err != nil {
			t.Fatal(err)
		}
		cs, raws = append(cs, descChunk{Hash: c.Hash, Len: int64(size)}), append(raws, raw)
	}
	return cs, raws
}

package persistence

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	put := func(raw []byte) descChunk {
		t.Helper()
		c, err := chunk.Encode(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.PutChunks(ctx, []carryover.ChunkInput{c}); err != nil {
			t.Fatal(err)
		}
		return descChunk{Hash: c.Hash, Len: int64(len(raw))}
	}
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

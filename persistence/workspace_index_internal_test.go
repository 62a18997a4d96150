package persistence

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// TestManyFilesAreOneRoot: a workspace of more files than indexMin is one root (the index's top),
// through which GC keeps every file: after the checkpoint is the only one and GC ran, a restore
// brings every file back byte for byte. A second checkpoint with no file changed has the same root
// and writes no chunk; one with a file changed writes its data, its descriptor and two index
// chunks (its bucket and the top), not an index of every file.
func TestManyFilesAreOneRoot(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	sid := mustSession(t, st, "s")
	ws := t.TempDir()
	n := 4000 // an index of every file would be 132 KB of hashes
	for i := range n {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprint("file ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &Checkpointer{Store: st, Retention: 1}
	turn := 0
	commit := func() (roots []string, written int64) {
		t.Helper()
		p, err := c.Prepare(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		turn++
		res, err := c.checkpointOnce(ctx, nil, p, turn, ws, &snapshotAnswer{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Prune(ctx, sid, 1); err != nil {
			t.Fatal(err)
		}
		cp, err := st.LatestCheckpoint(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		return cp.Roots, res.BytesWritten - int64(len(cp.Manifest))
	}
	first, _ := commit()
	if len(first) != 1 {
		t.Fatalf("%d files: %d roots, want 1 (the index)", n, len(first))
	}
	again, written := commit()
	if again[0] != first[0] || written != 0 {
		t.Fatalf("nothing changed: root %s (was %s), %d bytes of chunks written", again[0], first[0], written)
	}
	if err := os.WriteFile(filepath.Join(ws, "f0007.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, written := commit()
	if changed[0] == first[0] || written > 16<<10 {
		t.Fatalf("one file changed: root %s (was %s), %d bytes of chunks written", changed[0], first[0], written)
	}
	if _, _, err := st.GC(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := st.LatestCheckpoint(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.ParseManifest(cp)
	if err != nil {
		t.Fatal(err)
	}
	back := t.TempDir()
	if err := RestoreFilesWith(ctx, st, back, m.Files, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("f%04d.txt", i)
		want, _ := os.ReadFile(filepath.Join(ws, name))
		got, err := os.ReadFile(filepath.Join(back, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after GC and restore: %q (%v), want %q", name, got, err, want)
		}
	}
}

// askedReader is a chunk reader that records the hashes MissingChunks is asked for.
type askedReader struct {
	carryover.ChunkReader
	asked [][]string
}

func (a *askedReader) MissingChunks(ctx context.Context, hs []string) ([]string, error) {
	a.asked = append(a.asked, hs)
	return a.ChunkReader.MissingChunks(ctx, hs)
}

// TestUnchangedFilesAreVouchedForByTheirRoots: files unchanged since a committed checkpoint are
// trusted on its roots being stored (one short question), not on each file's ref; with a root gone
// (or none known) every reused ref is asked, and a file whose ref is gone is read again.
func TestUnchangedFilesAreVouchedForByTheirRoots(t *testing.T) {
	ctx := context.Background()
	st := storeT(t)
	mustSession(t, st, "s")
	src := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprint(i)), []byte(fmt.Sprint("data ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := writerT(t, st)
	first, err := SnapshotFiles(ctx, w, src, nil, FileLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, carryover.Checkpoint{ID: "c1", SessionID: "s", Turn: 1, Roots: first.Roots}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	scan := func(roots []string) (gone map[string]bool, asked [][]string) {
		t.Helper()
		root, err := os.OpenRoot(src)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		cands, _, err := scanWorkspace(root, FileLimits{})
		if err != nil {
			t.Fatal(err)
		}
		r := &askedReader{ChunkReader: st}
		if gone, err = markUnchanged(ctx, r, cands, first.Files, roots); err != nil {
			t.Fatal(err)
		}
		return gone, r.asked
	}
	if gone, asked := scan(first.Roots); len(gone) != 0 || len(asked) != 1 || len(asked[0]) != len(first.Roots) {
		t.Fatalf("roots stored: gone %v, asked %v; want one question of the %d roots", gone, asked, len(first.Roots))
	}
	absent := chunk.Hash([]byte("never stored"))
	if gone, asked := scan(append([]string{absent}, first.Roots...)); len(gone) != 0 || len(asked) != 2 || len(asked[1]) != 3 {
		t.Fatalf("a root gone: gone %v, asked %v; want the 3 reused refs asked after the roots", gone, asked)
	}
	if gone, asked := scan(nil); len(gone) != 0 || len(asked) != 1 || len(asked[0]) != 3 {
		t.Fatalf("no roots known: gone %v, asked %v; want the 3 reused refs asked", gone, asked)
	}
	// Every file written since (or none there, an empty workspace's every turn): no ref is reused,
	// so nothing is asked, roots or not.
	later := time.Now().Add(time.Minute)
	for i := range 3 {
		if err := os.Chtimes(filepath.Join(src, fmt.Sprint(i)), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if gone, asked := scan(first.Roots); len(gone) != 0 || len(asked) != 0 {
		t.Fatalf("no file reused: gone %v, asked %v; want nothing asked", gone, asked)
	}
}

package persistence

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
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

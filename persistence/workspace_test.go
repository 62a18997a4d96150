package persistence

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

// writeFileT writes data to dir/rel (parents created) with the given mtime.
func writeFileT(t *testing.T, dir, rel string, data []byte, mtime time.Time) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func entriesByPath(es []FileEntry) map[string]FileEntry {
	m := map[string]FileEntry{}
	for _, e := range es {
		m[e.Path] = e
	}
	return m
}

func skipsByPath(ss []carryover.FileSkip) map[string]string {
	m := map[string]string{}
	for _, s := range ss {
		m[s.Path] = s.Reason
	}
	return m
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	src := t.TempDir()
	mt := time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.UTC)
	files := map[string][]byte{
		"a.txt":              []byte("hello"),
		"empty":              {},
		"dir/b.csv":          bytes.Repeat([]byte("1,2,3\n"), 10000),
		"dir/sub/deep/c.bin": randomBytes(t, 300_000), // several chunks at ChunkSize 64 KiB
		"dir/sub/same.bin":   []byte("hello"),         // same content as a.txt: one data chunk
	}
	for rel, data := range files {
		writeFileT(t, src, rel, data, mt)
	}
	if err := os.Chmod(filepath.Join(src, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	lim := FileLimits{ChunkSize: 64 << 10}
	res, err := SnapshotFiles(ctx, w, src, nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for _, e := range res.Files {
		distinct[e.Ref] = true
	}
	// One root per distinct descriptor (a.txt and same.bin share theirs); past indexMin, an index.
	if len(res.Files) != len(files) || res.Saved != len(files) || len(res.Skipped) != 0 || len(res.Roots) != len(distinct) {
		t.Fatalf("snapshot: %d files, %d saved, skipped %v, %d roots", len(res.Files), res.Saved, res.Skipped, len(res.Roots))
	}
	if res.BytesWritten <= 0 || res.BytesWritten > 300_000+60_000+20_000 {
		t.Fatalf("bytes written %d", res.BytesWritten)
	}
	got := entriesByPath(res.Files)
	if e := got["a.txt"]; e.Size != 5 || e.Mode != 0o600 || !e.ModTime.Equal(mt) {
		t.Fatalf("a.txt entry %+v", e)
	}
	if got["a.txt"].Ref == got["dir/sub/same.bin"].Ref {
		// Same content gives the same descriptor: fine, and dedup means no second copy.
	} else {
		t.Fatalf("identical files got different refs")
	}
	err = w.Commit(ctx, carryover.Checkpoint{ID: "c1", SessionID: mustSession(t, s, "a"), Roots: res.Roots})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "restored")
	if err := RestoreFiles(ctx, s, dst, res.Files, false); err != nil {
		t.Fatal(err)
	}
	for rel, data := range files {
		p := filepath.Join(dst, filepath.FromSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%s: err %v, content equal %v", rel, err, bytes.Equal(b, data))
		}
		fi, _ := os.Stat(p)
		if !fi.ModTime().Equal(mt) || uint32(fi.Mode().Perm()) != got[rel].Mode {
			t.Fatalf("%s: mtime %v mode %v, want %v %o", rel, fi.ModTime(), fi.Mode(), mt, got[rel].Mode)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dst, ".carryover-restore-*"))
	if len(leftovers) != 0 {
		t.Fatalf("temp files left: %v", leftovers)
	}

	checkPruningRestore(t, s, dst, res.Files, files)
}

// checkPruningRestore: restoring onto a changed workspace with prune brings it back exactly, leaving
// hidden files and the ones named in Keep alone.
func checkPruningRestore(t *testing.T, s carryover.ChunkReader, dst string, entries []FileEntry, files map[string][]byte) {
	ctx := context.Background()
	writeFileT(t, dst, "dir/b.csv", []byte("overwritten"), time.Now())
	writeFileT(t, dst, "new/extra.txt", []byte("created after the checkpoint"), time.Now())
	writeFileT(t, dst, ".hidden", []byte("hidden stays"), time.Now())
	writeFileT(t, dst, "keep.log", []byte("named in Keep"), time.Now())
	os.Remove(filepath.Join(dst, "a.txt"))
	if err := RestoreFilesWith(ctx, s, dst, entries, RestoreOptions{Prune: true, Keep: []string{"keep.log"}}); err != nil {
		t.Fatal(err)
	}
	for rel, data := range files {
		if b, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(rel))); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("after prune restore %s: %v", rel, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "new")); !os.IsNotExist(err) {
		t.Fatalf("pruned file's directory remains: %v", err)
	}
	for _, rel := range []string{".hidden", "keep.log"} {
		if _, err := os.Stat(filepath.Join(dst, rel)); err != nil {
			t.Fatalf("%s was pruned: %v", rel, err)
		}
	}
}

func TestSnapshotSkipsUnchangedFilesWithoutReading(t *testing.T) {
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	src := t.TempDir()
	mt := time.Date(2025, 1, 1, 0, 0, 0, 42, time.UTC)
	writeFileT(t, src, "same.txt", []byte("version one"), mt)
	writeFileT(t, src, "changed.txt", []byte("old"), mt)
	first, err := SnapshotFiles(ctx, w, src, nil, FileLimits{})
	if err != nil {
		t.Fatal(err)
	}
	// Same size and mtime, different bytes: the snapshot must trust the stat and not read the file.
	writeFileT(t, src, "same.txt", []byte("version two"), mt)
	writeFileT(t, src, "changed.txt", []byte("new content"), mt.Add(time.Second))
	if err := os.Chmod(filepath.Join(src, "same.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	second, err := SnapshotFiles(ctx, w, src, first.Files, FileLimits{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := entriesByPath(first.Files), entriesByPath(second.Files)
	if b["same.txt"].Ref != a["same.txt"].Ref {
		t.Fatal("unchanged (size+mtime) file was read again")
	}
	if b["same.txt"].Mode != 0o640 {
		t.Fatalf("mode change not picked up: %o", b["same.txt"].Mode)
	}
	if b["changed.txt"].Ref == a["changed.txt"].Ref || second.Saved != 1 {
		t.Fatalf("changed file: ref kept %v, saved %d", b["changed.txt"].Ref == a["changed.txt"].Ref, second.Saved)
	}
	// The reused entry still restores the content saved the first time.
	dst := t.TempDir()
	if err := RestoreFiles(ctx, s, dst, second.Files, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "same.txt")); string(got) != "version one" {
		t.Fatalf("restored %q", got)
	}

	// A reused entry whose descriptor was collected is read again rather than trusted.
	// No checkpoint names anything, so everything goes (the writer is closed first: GC waits for it).
	w.Close()
	if _, _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := SnapshotFiles(ctx, writerT(t, s), src, second.Files, FileLimits{})
	if err != nil {
		t.Fatal(err)
	}
	// same.txt is read again and now yields its current bytes; changed.txt is read again too and,
	// its content being the same, keeps its ref (not counted as saved) but is stored anew.
	c := entriesByPath(third.Files)
	if third.Saved != 1 || c["same.txt"].Ref == b["same.txt"].Ref || c["changed.txt"].Ref != b["changed.txt"].Ref || third.BytesWritten == 0 {
		t.Fatalf("after GC: saved %d, written %d: collected refs must be rewritten", third.Saved, third.BytesWritten)
	}
	if missing, _ := s.MissingChunks(ctx, third.Roots); len(missing) != 0 {
		t.Fatalf("roots missing after re-snapshot: %v", missing)
	}
}

func TestSnapshotAppendWritesAboutTheAppendedBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	src := t.TempDir()
	const size, appended = 64 << 20, 1 << 20
	p := filepath.Join(src, "big.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for range size / (4 << 20) {
		f.Write(randomBytes(t, 4<<20))
	}
	f.Close()
	first, err := SnapshotFiles(ctx, w, src, nil, FileLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if first.BytesWritten < size {
		t.Fatalf("first snapshot wrote %d bytes of a %d-byte random file", first.BytesWritten, size)
	}
	f, _ = os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(randomBytes(t, appended))
	f.Close()
	os.Chtimes(p, time.Now().Add(time.Second), time.Now().Add(time.Second))
	second, err := SnapshotFiles(ctx, w, src, first.Files, FileLimits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("append of %d bytes to a %d-byte file wrote %d bytes", appended, size, second.BytesWritten)
	if second.BytesWritten < appended || second.BytesWritten > appended+64<<10 {
		t.Fatalf("append wrote %d bytes, want about %d", second.BytesWritten, appended)
	}
	if second.Saved != 1 || second.Files[0].Size != size+appended {
		t.Fatalf("saved %d, entry %+v", second.Saved, second.Files[0])
	}
}

func TestSnapshotReportsSkips(t *testing.T) {
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	src := t.TempDir()
	outside := t.TempDir()
	now := time.Now()
	writeFileT(t, src, "ok.txt", []byte("fine"), now)
	writeFileT(t, src, ".env", []byte("SECRET=1"), now)
	writeFileT(t, src, ".git/objects/x", []byte("blob"), now)
	writeFileT(t, src, "big.dat", make([]byte, 2000), now)
	writeFileT(t, src, "b/second.dat", make([]byte, 900), now)
	writeFileT(t, src, "c/third.dat", make([]byte, 900), now)
	writeFileT(t, outside, "target.txt", []byte("outside the workspace"), now)
	if err := os.Symlink(filepath.Join(outside, "target.txt"), filepath.Join(src, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := SnapshotFiles(ctx, w, src, nil, FileLimits{MaxFileBytes: 1000, MaxTotalBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	saved := entriesByPath(res.Files)
	skipped := skipsByPath(res.Skipped)
	if len(saved) != 2 || saved["ok.txt"].Ref == "" || saved["b/second.dat"].Ref == "" {
		t.Fatalf("saved %v", saved)
	}
	want := map[string]string{
		".env":        "hidden",
		".git":        "hidden",
		"big.dat":     "larger than persistence.max_file_bytes (1000)",
		"c/third.dat": "workspace over persistence.max_workspace_bytes (1000)",
		"link.txt":    "symlink",
		"linkdir":     "symlink",
		"pipe":        "special file",
	}
	for rel, reason := range want {
		if !strings.HasPrefix(skipped[rel], reason) {
			t.Errorf("%s: skip reason %q, want %q", rel, skipped[rel], reason)
		}
	}
	if len(skipped) != len(want) {
		t.Errorf("skipped %v", skipped)
	}

	withHidden, err := SnapshotFiles(ctx, w, src, nil, FileLimits{SaveHidden: true})
	if err != nil {
		t.Fatal(err)
	}
	if e := entriesByPath(withHidden.Files); e[".env"].Ref == "" || e[".git/objects/x"].Ref == "" {
		t.Fatalf("SaveHidden: %v", withHidden.Files)
	}

	if err := os.Chmod(filepath.Join(src, "ok.txt"), 0); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root reads mode-0 files anyway
		res, err := SnapshotFiles(ctx, w, src, nil, FileLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if r := skipsByPath(res.Skipped)["ok.txt"]; !strings.HasPrefix(r, "unreadable") {
			t.Fatalf("unreadable file: %q", r)
		}
	}
}

func TestRestoreRefusesEscapes(t *testing.T) {
	s := storeT(t)
	w := writerT(t, s)
	ctx := context.Background()
	src := t.TempDir()
	writeFileT(t, src, "f", []byte("x"), time.Now())
	res, err := SnapshotFiles(ctx, w, src, nil, FileLimits{})
	if err != nil {
		t.Fatal(err)
	}
	ref := res.Files[0].Ref
	dst := t.TempDir()
	for _, bad := range []string{"../escape", "/abs", "a/../../b", "./x"} {
		if err := RestoreFiles(ctx, s, dst, []FileEntry{{Path: bad, Size: 1, Ref: ref}}, false); err == nil {
			t.Errorf("path %q accepted", bad)
		}
	}
	// A symlinked directory in the workspace does not lead the restore outside it.
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dst, "out")); err != nil {
		t.Fatal(err)
	}
	if err := RestoreFiles(ctx, s, dst, []FileEntry{{Path: "out/f", Size: 1, Ref: ref, ModTime: time.Now()}}, false); err == nil {
		t.Error("restore through a symlink to outside the workspace succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); !os.IsNotExist(err) {
		t.Fatalf("file written outside the workspace: %v", err)
	}
}

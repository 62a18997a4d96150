package persistence

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWorkspaceAhead: a file changed after the checkpoint, one added and one deleted are named; an
// unchanged one and a hidden one are not.
func TestWorkspaceAhead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("same.txt", "1\n")
	write("changed.txt", "1\n")
	write("deleted.txt", "1\n")
	var entries []FileEntry
	for _, n := range []string{"same.txt", "changed.txt", "deleted.txt"} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, FileEntry{Path: n, Size: fi.Size(), ModTime: fi.ModTime(), Ref: "x"})
	}
	if got, err := workspaceAhead(dir, entries, FileLimits{}); err != nil || len(got) != 0 {
		t.Fatalf("the workspace as checkpointed: ahead %v, %v; want none", got, err)
	}
	write("changed.txt", "1\n2\n")
	write("added.txt", "new")
	write(".hidden", "not saved anyway")
	os.Remove(filepath.Join(dir, "deleted.txt"))
	got, err := workspaceAhead(dir, entries, FileLimits{})
	if want := []string{"added.txt", "changed.txt", "deleted.txt"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("ahead %v, %v; want %v", got, err, want)
	}
	if got, err := workspaceAhead(filepath.Join(dir, "none"), entries, FileLimits{}); err != nil || got != nil {
		t.Fatalf("a missing workspace: %v, %v", got, err)
	}
}

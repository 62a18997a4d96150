package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpoolAndPrepareDirs(t *testing.T) {
	data := t.TempDir()
	own := filepath.Join(t.TempDir(), "spool")
	c := Config{DataDir: data, SpoolDir: own}
	if c.Spool() != own {
		t.Fatalf("Spool = %s, want the configured dir", c.Spool())
	}
	if err := os.MkdirAll(filepath.Join(own, "k1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := PrepareDirs(c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(own, "k1")); err != nil {
		t.Errorf("a configured spool dir was cleared at start-up: %v", err)
	}
	for _, d := range []string{"workspaces", "kernels"} {
		if st, err := os.Stat(filepath.Join(data, d)); err != nil || !st.IsDir() {
			t.Errorf("%s not made: %v", d, err)
		}
	}
	// Without one, the spool is the server's own (tmpfs or data_dir/spool), one per data dir, and a
	// start-up clears what a previous run left in it.
	d1, d2 := Config{DataDir: t.TempDir()}, Config{DataDir: t.TempDir()}
	if d1.Spool() == d2.Spool() || !(strings.HasPrefix(d1.Spool(), "/dev/shm/carryover-spool-") || d1.Spool() == filepath.Join(d1.DataDir, "spool")) {
		t.Fatalf("default spools %s and %s", d1.Spool(), d2.Spool())
	}
	t.Cleanup(func() { _ = os.RemoveAll(d1.Spool()) })
	left := filepath.Join(d1.Spool(), "old-kernel")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := PrepareDirs(d1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("a previous run's spool survived start-up: %v", err)
	}
}

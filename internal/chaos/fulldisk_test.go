package chaos

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/carryover/carryover/internal/sandboxtest"

	_ "github.com/mattn/go-sqlite3"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

// smallDisk mounts a tmpfs of size bytes at a temp dir (a data dir's filesystem that can fill up)
// and unmounts it when the test ends.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		sandboxtest.Missing(t, "a full disk needs root (mount a tmpfs)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// integrity runs SQLite's integrity_check on the data dir's database (read-only, beside the server).
func integrity(t *testing.T, dataDir string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dataDir, "carryover.db")+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
}

// TestFullDisk fills the data dir's filesystem under a live session: the turn whose checkpoint
// cannot be written answers with the failure named and its live state kept, reads keep being served,
// the store is not damaged, and once there is space the next turn checkpoints again.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	dir := smallDisk(t, "300m")
	p := servertest.StartProcess(t, servertest.Options{Token: "fulldisk", Dir: dir,
		Flags: []string{"--pool.size", "0"}, Env: []string{"CARRYOVER_SANDBOX_ENABLED=false",
			"CARRYOVER_PERSISTENCE_SPOOL_DIR=" + filepath.Join(dir, "spool")}}) // the spool fills up too
	c := client.New(p.Base, p.Token)
	ctx := t.Context()
	if _, err := c.CreateSession(ctx, client.CreateRequest{SessionID: "fd"}); err != nil {
		t.Fatal(err)
	}
	run := func(code string) *client.RunResult {
		t.Helper()
		res, err := c.Run(ctx, "fd", client.RunRequest{Code: code})
		if err != nil {
			t.Fatalf("run %q: %v", code, err)
		}
		return res
	}
	if res := run("a = 1\nopen('f.txt', 'w').write('one')"); res.Status != "ok" || res.CheckpointError != "" {
		t.Fatalf("first turn: %+v", res)
	}
	// The status warns while there is still room (300 MiB is below doctor's 1 GiB minimum).
	st, err := c.Status(ctx)
	if err != nil || st.Disk == nil || st.Disk.Level == "ok" || !strings.Contains(st.Disk.Warning, "checkpoints fail") || st.Disk.FreeBytes < 100<<20 {
		t.Fatalf("/api/status before the disk is full: %+v %v", st.Disk, err)
	}
	filler := filepath.Join(dir, "filler")
	sandboxtest.FillDisk(t, filler)
	res := run("import os\nb = os.urandom(4 << 20)\na = 2")
	t.Logf("turn on a full disk: status %s, checkpoint_error %q, record_error %q", res.Status, res.CheckpointError, res.RecordError)
	if res.Status != "ok" || !(strings.Contains(res.CheckpointError, "disk is full") || strings.Contains(strings.ToLower(res.CheckpointError), "no space left")) {
		t.Fatalf("the turn on a full disk: want status ok and a checkpoint_error naming the full disk, got %+v", res)
	}
	if res := run("print(a, len(b))"); strings.TrimSpace(res.Stdout) != "2 4194304" {
		t.Fatalf("the live state after the failed checkpoint: %+v", res)
	}
	if _, err := c.GetSession(ctx, "fd"); err != nil {
		t.Fatalf("a read on a full disk: %v", err)
	}
	if st, err := c.Status(ctx); err != nil || st.Disk == nil || st.Disk.Level != "fail" || st.Disk.FreeBytes > 1<<20 {
		t.Fatalf("/api/status on a full disk: %+v %v", st.Disk, err)
	}
	integrity(t, filepath.Join(dir, "data"))
	os.Remove(filler)
	res = run("a = 3")
	if res.Status != "ok" || res.CheckpointError != "" || res.Checkpoint == nil {
		t.Fatalf("the first turn once there is space: %+v", res)
	}
	integrity(t, filepath.Join(dir, "data"))
	// Nothing of the failed snapshots is left in the spool (the committed ones' files are removed as
	// they are read): partial files would hold the space the next checkpoint needs.
	filepath.WalkDir(filepath.Join(dir, "spool"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left in the spool: %s", path)
		}
		return nil
	})
}

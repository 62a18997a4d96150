package sqlite

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestWALRewindsUnderSteadyCommits commits without pause for longer than several checkpoint delays:
// the background checkpointer must backfill the WAL and let it rewind, so the WAL file stays far
// smaller than what was committed (each commit appends at least one 64 KiB frame). Without the
// pass under the writer mutex, commits landing during a passive checkpoint keep the WAL growing
// until SQLite's backstop fires in a commit; with SQLite's default checkpoint that commit pays it.
func TestWALRewindsUnderSteadyCommits(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "s")
	commits := 0
	for end := time.Now().Add(4 * walCheckpointDelay); time.Now().Before(end); commits++ {
		if _, err := s.AppendEvent(ctx, "s", "turn", map[string]int{"n": commits}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	appended := int64(commits) * pageSize
	if fi.Size() > appended/2 {
		t.Fatalf("the WAL is %d bytes after %d commits (at least %d bytes appended): it did not rewind", fi.Size(), commits, appended)
	}
	var backstop int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&backstop); err != nil || backstop != walBackstopPages {
		t.Fatalf("wal_autocheckpoint = %d (%v), want the backstop %d", backstop, err, walBackstopPages)
	}
}

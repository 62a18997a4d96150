package sqlite

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"testing"
	"time"
)

// TestWALRewindsUnderSteadyCommits commits without pause until the WAL has rewound twice: the
// background checkpointer must backfill the WAL and let it rewind again and again. The WAL header's
// checkpoint sequence number counts the rewinds. Without the pass under the writer mutex, commits
// landing during a passive checkpoint keep the WAL from ever rewinding until SQLite's 640 MiB backstop
// fires inside a commit (at most once here; with SQLite's default checkpoint, every ~66th turn paid a
// checkpoint). Two rewinds take two checkpoint delays; the test allows twenty, since a loaded machine
// (CI runs packages in parallel) can starve the checkpointer for a while: it failed once at four.
// The backstop cannot pass for the checkpointer: it fires only once the WAL file holds
// walBackstopPages pages, and the file never shrinks, so its size shows whether it ever did.
func TestWALRewindsUnderSteadyCommits(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	sessionT(t, s, "s")
	commits := 0
	rewinds := uint32(0)
	start := time.Now()
	for deadline := start.Add(20 * walCheckpointDelay); rewinds < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the WAL rewound %d times in %v of steady commits (%d of them), want one per checkpoint pass",
				rewinds, time.Since(start).Round(time.Millisecond), commits)
		}
		for range 200 {
			if _, err := s.AppendEvent(ctx, "s", "turn", map[string]int{"n": commits}); err != nil {
				t.Fatal(err)
			}
			commits++
		}
		rewinds = walRewinds(t, s.path+"-wal")
	}
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= walBackstopPages*pageSize {
		t.Fatalf("the WAL grew to %d bytes: its rewinds were the backstop's, not the checkpointer's", fi.Size())
	}
	t.Logf("2 rewinds after %v (%d commits), WAL file %d MiB", time.Since(start).Round(time.Millisecond), commits, fi.Size()>>20)
	var backstop int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&backstop); err != nil || backstop != walBackstopPages {
		t.Fatalf("wal_autocheckpoint = %d (%v), want the backstop %d", backstop, err, walBackstopPages)
	}
}

// walRewinds reads the checkpoint sequence number in the WAL file's header.
func walRewinds(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 32)
	if _, err := io.ReadFull(f, hdr); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(hdr[12:16])
}

package sqlite

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"testing"
	"time"
)

// TestWALRewindsUnderSteadyCommits commits without pause for four checkpoint delays: the background
// checkpointer must backfill the WAL and let it rewind each time. The WAL header's checkpoint sequence
// number counts the rewinds. Without the pass under the writer mutex, commits landing during a passive
// checkpoint keep the WAL from ever rewinding until SQLite's 640 MiB backstop fires inside a commit
// (at most once here; with SQLite's default checkpoint, every ~66th turn paid a checkpoint).
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
	hdr := make([]byte, 32)
	f, err := os.Open(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.ReadFull(f, hdr); err != nil {
		t.Fatal(err)
	}
	if rewinds := binary.BigEndian.Uint32(hdr[12:16]); rewinds < 2 {
		t.Fatalf("the WAL rewound %d times in %v of steady commits (%d of them), want one per checkpoint pass", rewinds, 4*walCheckpointDelay, commits)
	}
	var backstop int
	if err := s.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&backstop); err != nil || backstop != walBackstopPages {
		t.Fatalf("wal_autocheckpoint = %d (%v), want the backstop %d", backstop, err, walBackstopPages)
	}
}

package sqlite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/chunk"
)

// The crash tests re-run this test binary as a child that writes checkpoints and is SIGKILLed by the
// parent, which then opens the database the way a restarted server would.
const crashChildEnv = "CARRYOVER_STORE_CRASH_CHILD"

// testDescriptor is the JSON of a file descriptor chunk as the engine writes it: {"size":N,"chunks":[...]}.
type testDescriptor struct {
	Size   int64    `json:"size"`
	Chunks []string `json:"chunks"`
}

// putCheckpointChunksT puts n random data chunks and a descriptor naming them, and returns the
// descriptor's hash (the checkpoint root).
func putCheckpointChunksT(ctx context.Context, w carryover.ChunkWriter, n, size int) (string, error) {
	var all []carryover.ChunkInput
	var hashes []string
	for range n {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		c, err := chunk.Encode(b, nil)
		if err != nil {
			return "", err
		}
		all = append(all, c)
		hashes = append(hashes, c.Hash)
	}
	if _, err := w.PutChunks(ctx, all); err != nil {
		return "", err
	}
	desc, _ := json.Marshal(testDescriptor{Size: int64(n * size), Chunks: hashes})
	d, err := chunk.Encode(desc, hashes)
	if err != nil {
		return "", err
	}
	if _, err := w.PutChunks(ctx, []carryover.ChunkInput{d}); err != nil {
		return "", err
	}
	return d.Hash, nil
}

// TestStoreCrashChild is the child side; it does nothing in a normal run.
func TestStoreCrashChild(t *testing.T) {
	mode := os.Getenv(crashChildEnv)
	if mode == "" {
		t.Skip("helper process of TestCrashLeavesLastCheckpointComplete")
	}
	ctx := context.Background()
	s, err := Open(os.Getenv(crashChildEnv + "_DB"))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fail := func(err error) {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	switch mode {
	case "put-then-wait":
		w, err := s.BeginCheckpoint(ctx)
		if err != nil {
			fail(err)
		}
		if _, err := putCheckpointChunksT(ctx, w, 8, 256<<10); err != nil {
			fail(err)
		}
		fmt.Println("PUT")
		time.Sleep(time.Minute) // killed here, between the puts and the commit
	case "loop":
		base, _ := strconv.Atoi(os.Getenv(crashChildEnv + "_TURN"))
		for turn := base; ; turn++ {
			if err := crashTurn(ctx, s, turn); err != nil {
				fail(err)
			}
			fmt.Println("COMMITTED", turn)
			if _, err := s.Prune(ctx, "a", 3); err != nil {
				fail(err)
			}
			if turn%3 == 0 {
				if _, _, err := s.GC(ctx); err != nil {
					fail(err)
				}
			}
		}
	}
	os.Exit(0)
}

// crashTurn commits checkpoint t<turn> of session "a" with fresh chunks through a writer of its own.
func crashTurn(ctx context.Context, s *Store, turn int) error {
	w, err := s.BeginCheckpoint(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	root, err := putCheckpointChunksT(ctx, w, 4, 256<<10)
	if err != nil {
		return err
	}
	return w.Commit(ctx, carryover.Checkpoint{ID: fmt.Sprint("t", turn), SessionID: "a", Turn: turn, Roots: []string{root}})
}

// crashChildT starts the child in mode and returns it with a scanner over its stdout.
func crashChildT(t *testing.T, db, mode string, turn int) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestStoreCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+mode, crashChildEnv+"_DB="+db, crashChildEnv+"_TURN="+strconv.Itoa(turn))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// verifyCheckpointT reads every chunk a checkpoint reaches (ReadChunk checks each against its hash).
func verifyCheckpointT(t *testing.T, s *Store, cp carryover.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	if len(cp.Roots) == 0 {
		t.Fatalf("checkpoint %s has no roots", cp.ID)
	}
	for _, r := range cp.Roots {
		b, err := s.ReadChunk(ctx, r, nil)
		if err != nil {
			t.Fatalf("checkpoint %s: root: %v", cp.ID, err)
		}
		var d testDescriptor
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("checkpoint %s: descriptor: %v", cp.ID, err)
		}
		var total int64
		for _, h := range d.Chunks {
			data, err := s.ReadChunk(ctx, h, nil)
			if err != nil {
				t.Fatalf("checkpoint %s: %v", cp.ID, err)
			}
			total += int64(len(data))
		}
		if total != d.Size {
			t.Fatalf("checkpoint %s: %d bytes, descriptor says %d", cp.ID, total, d.Size)
		}
	}
}

func integrityT(t *testing.T, s *Store) {
	t.Helper()
	var res string
	if err := s.db.Get(&res, `PRAGMA integrity_check`); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
	var fk []struct {
		Table  string `db:"table"`
		RowID  *int64 `db:"rowid"`
		Parent string `db:"parent"`
		FKID   int    `db:"fkid"`
	}
	if err := s.db.Select(&fk, `PRAGMA foreign_key_check`); err != nil || len(fk) != 0 {
		t.Fatalf("foreign_key_check: %+v %v", fk, err)
	}
}

// TestCrashLeavesLastCheckpointComplete: whenever a writer dies, the database opens clean with its last
// commit whole.
func TestCrashLeavesLastCheckpointComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "crash.db")
	s, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	sessionT(t, s, "a")
	if err := crashTurn(ctx, s, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Run("killed between puts and commit", func(t *testing.T) { crashBetweenPutsAndCommit(t, db) })
	t.Run("killed at random moments of a commit loop", func(t *testing.T) { crashDuringCommitLoop(t, db) })
}

// crashBetweenPutsAndCommit kills a child that put a checkpoint's chunks and has not committed: the
// previous checkpoint stays the latest and whole, and the orphans are garbage.
func crashBetweenPutsAndCommit(t *testing.T, db string) {
	ctx := context.Background()
	cmd, out := crashChildT(t, db, "put-then-wait", 0)
	if !out.Scan() || out.Text() != "PUT" {
		t.Fatalf("child said %q", out.Text())
	}
	cmd.Process.Kill()
	cmd.Wait()
	s, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	integrityT(t, s)
	latest, err := s.LatestCheckpoint(ctx, "a")
	if err != nil || latest.ID != "t0" {
		t.Fatalf("latest after crash: %+v %v", latest, err)
	}
	verifyCheckpointT(t, s, latest)
	// The orphaned chunks (8 data + 1 descriptor) are garbage; the base checkpoint survives GC.
	if n, _, err := s.GC(ctx); err != nil || n != 9 {
		t.Fatalf("gc of orphans: %d %v", n, err)
	}
	verifyCheckpointT(t, s, latest)
}

// crashDuringCommitLoop kills, four times, a child that commits, prunes and collects in a loop: every
// reported commit survives, and every listed checkpoint reads back whole.
func crashDuringCommitLoop(t *testing.T, db string) {
	ctx := context.Background()
	turn := 1
	for round := range 4 {
		cmd, out := crashChildT(t, db, "loop", turn)
		last := -1
		want := 2 + round
		for last < turn+want && out.Scan() {
			line := out.Text()
			if strings.HasPrefix(line, "ERR") {
				t.Fatalf("child: %s", line)
			}
			fmt.Sscanf(line, "COMMITTED %d", &last)
		}
		time.Sleep(time.Duration(rand.IntN(15000)) * time.Microsecond)
		cmd.Process.Kill()
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("child was not killed: %v", err)
		}
		s, err := Open(db)
		if err != nil {
			t.Fatal(err)
		}
		integrityT(t, s)
		latest, err := s.LatestCheckpoint(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if latest.Turn < last {
			t.Fatalf("round %d: latest turn %d, but the child reported %d committed", round, latest.Turn, last)
		}
		cps, err := s.ListCheckpoints(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range cps {
			verifyCheckpointT(t, s, cp)
		}
		turn = latest.Turn + 1
		s.Close()
	}
}

package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/backup"
	"github.com/carryover/carryover/persistence/chunk"
	"github.com/carryover/carryover/persistence/sqlite"
)

// The backup section: an on-demand backup of a SQLite store (backup.Snapshot from the database
// file, as `carryover backup --to DIR` takes it) beside the floors of the same bytes on the same
// disk: when nothing changed since the last backup, beside SQLite's online backup API copying the
// file (the consistent copy every backup starts with); the first backup into an empty directory,
// beside cp + fsync of the file. The store holds checkpoints of 4 MiB chunks, half random (as float
// arrays are), half compressible text.

func benchBackup(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	dir, _, st, err := benchStore(ctx, env, "backup", "carryover.db", "b")
	if err != nil {
		return nil, err
	}
	chunks, reps := 64, 5
	if env.Quick {
		chunks, reps = 4, 1
	}
	err = fillBackupStore(ctx, st, "b", chunks)
	if cerr := st.Close(); err == nil {
		err = cerr // the WAL checkpointed into the file: cp copies the whole store
	}
	if err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "carryover.db")
	fi, err := os.Stat(db)
	if err != nil {
		return nil, err
	}
	src := backup.CopyFunc(func(ctx context.Context, path string) error { return sqlite.BackupFile(ctx, db, path) })
	tmp := filepath.Join(dir, "backup-tmp")
	var round []string // this round's directories, removed at its end
	fresh := func() string {
		d := filepath.Join(dir, fmt.Sprintf("target-%d", len(round)))
		round = append(round, d)
		return d
	}

	var first, firstFloor, again, againFloor []time.Duration
	var pieces int
	for range reps {
		// The first backup into an empty directory, and cp + fsync of the file into another.
		target := fresh()
		t := time.Now()
		m, err := backup.Snapshot(ctx, src, backup.Dir(target), tmp, db, nil)
		if err != nil {
			return nil, err
		}
		first = append(first, time.Since(t))
		pieces = len(m.Pieces)
		d, err := copyFsync(db, fresh())
		if err != nil {
			return nil, err
		}
		firstFloor = append(firstFloor, d)
		// Nothing changed: the same backup again into that directory (every piece is there), and
		// SQLite's backup API copying the file.
		t = time.Now()
		if _, err := backup.Snapshot(ctx, src, backup.Dir(target), tmp, db, nil); err != nil {
			return nil, err
		}
		again = append(again, time.Since(t))
		t = time.Now()
		cp := filepath.Join(fresh(), "copy.db")
		if err := os.MkdirAll(filepath.Dir(cp), 0o755); err != nil {
			return nil, err
		}
		if err := sqlite.BackupFile(ctx, db, cp); err != nil {
			return nil, err
		}
		againFloor = append(againFloor, time.Since(t))
		for _, d := range round {
			if err := os.RemoveAll(d); err != nil {
				return nil, err
			}
		}
		round = round[:0]
	}
	size := fmt.Sprintf("%d MiB store", fi.Size()>>20)
	f, ff := percentile(first, 50), percentile(firstFloor, 50)
	a, af := percentile(again, 50), percentile(againFloor, 50)
	return []benchRow{
		{Name: "backup, nothing changed (" + size + ")", Ours: fmtDur(a), Peer: fmtDur(af) + " SQLite backup API", Ratio: ratio(a, af),
			Note: fmt.Sprintf("consistent copy + %d pieces hashed, none written; median of %d", pieces, reps)},
		{Name: "backup, first into an empty dir (" + size + ")", Ours: fmtDur(f), Peer: fmtDur(ff) + " cp + fsync", Ratio: ratio(f, ff),
			Note: fmt.Sprintf("copy + %d pieces written and fsynced; median of %d", pieces, reps)},
	}, nil
}

// fillBackupStore commits n checkpoints of session id, each with one new 4 MiB chunk: even ones
// random, odd ones text that zstd compresses.
func fillBackupStore(ctx context.Context, st carryover.CheckpointStore, id string, n int) error {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while the session runs turn after turn")
	for i := range n {
		raw := make([]byte, 4<<20)
		if i%2 == 0 {
			for j := 0; j+8 <= len(raw); j += 8 {
				v := rng.Uint64()
				for k := range 8 {
					raw[j+k] = byte(v >> (8 * k))
				}
			}
		} else {
			var b strings.Builder
			for b.Len() < len(raw) {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
			copy(raw, b.String())
		}
		in, err := chunk.Encode(raw, nil)
		if err != nil {
			return err
		}
		w, err := st.BeginCheckpoint(ctx)
		if err != nil {
			return err
		}
		_, err = w.PutChunks(ctx, []carryover.ChunkInput{in})
		if err == nil {
			err = w.Commit(ctx, carryover.Checkpoint{ID: fmt.Sprintf("ckpt_%04d", i), SessionID: id, Turn: i + 1,
				Manifest: []byte(`{"v":1}`), Bytes: int64(len(in.Data)), CreatedAt: time.Now().UTC(), Roots: []string{in.Hash}})
		}
		w.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// copyFsync copies file src into a new dir dst and fsyncs the copy and the dir: cp's floor.
func copyFsync(src, dst string) (time.Duration, error) {
	t := time.Now()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(dst, filepath.Base(src)))
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	d, err := os.Open(dst)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	return time.Since(t), d.Sync()
}

package backup_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/carryover/carryover/persistence/backup"
	"github.com/carryover/carryover/persistence/sqlite"
)

// countingDir is a real directory target that counts the questions and piece uploads it gets.
type countingDir struct {
	backup.Dir
	exists, piecePuts atomic.Int64
}

func (d *countingDir) Exists(ctx context.Context, key string) (bool, error) {
	d.exists.Add(1)
	return d.Dir.Exists(ctx, key)
}

func (d *countingDir) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, "pieces/") {
		d.piecePuts.Add(1)
	}
	return d.Dir.Put(ctx, key, data)
}

// TestSnapshotIntoATargetWithPieces: an on-demand backup into a target that holds an earlier
// snapshot learns its pieces in one listing, so an unchanged piece is neither compressed, asked
// about, nor uploaded again (each piece cost a zstd pass and an Exists round trip); a changed one
// is uploaded.
func TestSnapshotIntoATargetWithPieces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "src.db")
	conn, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	blob := make([]byte, 3*backup.PieceBytes)
	_, _ = rand.Read(blob)
	if _, err := conn.Exec(`CREATE TABLE t (b BLOB); INSERT INTO t VALUES (?)`, blob); err != nil {
		t.Fatal(err)
	}
	src := backup.CopyFunc(func(ctx context.Context, path string) error { return sqlite.BackupFile(ctx, db, path) })
	target := &countingDir{Dir: backup.Dir(filepath.Join(dir, "target"))}
	first, err := backup.Snapshot(ctx, src, target, filepath.Join(dir, "tmp"), "src", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := target.piecePuts.Load(); n != int64(len(first.Pieces)) || n < 3 {
		t.Fatalf("first snapshot uploaded %d pieces of %d", n, len(first.Pieces))
	}
	target.exists.Store(0)
	target.piecePuts.Store(0)
	if _, err := conn.Exec(`INSERT INTO t VALUES (x'01')`); err != nil {
		t.Fatal(err)
	}
	second, err := backup.Snapshot(ctx, src, target, filepath.Join(dir, "tmp"), "src", nil)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i, p := range second.Pieces {
		if i < len(first.Pieces) && p == first.Pieces[i] {
			same++
		}
	}
	if same < 3 {
		t.Fatalf("only %d pieces unchanged: the test's change touched more than it meant to", same)
	}
	if e, p := target.exists.Load(), target.piecePuts.Load(); e != int64(len(second.Pieces)-same) || p != e {
		t.Errorf("second snapshot: %d Exists, %d piece uploads; want one each for the %d changed pieces", e, p, len(second.Pieces)-same)
	}
}

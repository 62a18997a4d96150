package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/carryover/carryover/internal/servertest"
	"github.com/carryover/carryover/persistence/format"
	"github.com/carryover/carryover/persistence/sqlite"
)

// bump opens the database file behind carryover's back and runs stmt (a newer carryover's doing).
func bump(t *testing.T, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
}

func openClose(t *testing.T, path string) {
	t.Helper()
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// A database migrated by a newer carryover is refused at open, naming both schema versions, and
// left as it was.
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "carryover.db")
	openClose(t, path)
	bump(t, path, `INSERT INTO schema_migrations (name, applied_at) VALUES ('migrations/0999_future.sql', '2030-01-01T00:00:00Z')`)
	_, err := sqlite.Open(path)
	if err == nil || !strings.Contains(err.Error(), "schema version 999 (0999_future.sql)") || !strings.Contains(err.Error(), "this carryover knows (schema version") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// A store whose recorded checkpoint format is newer than this binary reads is refused, naming both.
func TestOpenRefusesNewerFormat(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "carryover.db")
	openClose(t, path)
	openClose(t, path) // the recorded format is this binary's: opens again
	bump(t, path, `UPDATE store_meta SET value = value + 1 WHERE name = 'format'`)
	_, err := sqlite.Open(path)
	want := []string{"checkpoint format " + itoa(format.Newest+1), "reads formats up to " + itoa(format.Newest)}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("open of a newer format: %v (want %q)", err, w)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The server refuses to start on a store a newer carryover migrated, with the message naming both
// versions, and exits (the real binary, as an operator would see it).
func TestServeRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "carryover.db")
	openClose(t, path)
	bump(t, path, `INSERT INTO schema_migrations (name, applied_at) VALUES ('migrations/0999_future.sql', '2030-01-01T00:00:00Z')`)
	bin := servertest.MustBinary(t) // built first: the build is not the serve's minute
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--data_dir", dir, "--server.addr", "127.0.0.1:0", "--pool.size", "0")
	cmd.Env = append(os.Environ(), "CARRYOVER_SANDBOX_ENABLED=false")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "schema version 999 (0999_future.sql), newer than this carryover knows (schema version") {
		t.Fatalf("serve on a newer schema: %v\n%s", err, out)
	}
}

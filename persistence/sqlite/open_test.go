package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carryover/carryover"
)

func TestOpenPragmasAndMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ps int
	var jm string
	var fk int
	db := s.db
	if err := db.Get(&ps, `PRAGMA page_size`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&jm, `PRAGMA journal_mode`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&fk, `PRAGMA foreign_keys`); err != nil {
		t.Fatal(err)
	}
	if ps != pageSize || jm != "wal" || fk != 1 {
		t.Fatalf("page_size=%d journal_mode=%s foreign_keys=%d", ps, jm, fk)
	}
	var av int
	if err := db.Get(&av, `PRAGMA auto_vacuum`); err != nil || av != 2 {
		t.Fatalf("auto_vacuum=%d err=%v, want 2 (incremental)", av, err)
	}
	var applied []string
	if err := db.Select(&applied, `SELECT name FROM schema_migrations ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0] != "migrations/0001_init.sql" {
		t.Fatalf("applied migrations %v", applied)
	}
	sessionT(t, s, "a")
	s.Close()

	// Reopening applies nothing twice and keeps the data.
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.db.Get(&n, `SELECT COUNT(*) FROM schema_migrations`); err != nil || n != len(applied) {
		t.Fatalf("after reopen %d migrations (err %v), want %d", n, err, len(applied))
	}
	if _, err := s.GetSession(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
}

func TestOpenPathWithSpecialCharacters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir #1?x=y")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "my db.sqlite")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sessionT(t, s, "x")
	s.Close()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("database not at %q: %v", path, err)
	}
}

func TestTimesRoundTripUTC(t *testing.T) {
	s := storeT(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("x", 3600))
	if err := s.CreateSession(ctx, carryover.SessionRecord{ID: "t", State: "s", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetSession(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if !r.CreatedAt.Equal(at) || r.CreatedAt.Location() != time.UTC || !r.UpdatedAt.Equal(at) {
		t.Fatalf("created %v (%v) updated %v, want %v in UTC", r.CreatedAt, r.CreatedAt.Location(), r.UpdatedAt, at)
	}
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Backups use SQLite's online backup API (sqlite3_backup_*): it copies every page of the database
// as of one read transaction, so the copy is consistent while turns keep committing (under WAL a
// reader never blocks the writer, nor the writer the reader). The whole copy is one backup step:
// a copy in several steps restarts whenever another connection writes between two of them, which
// on a busy server would be always.

// BackupTo writes a consistent copy of the store into path, a file that must not exist yet.
func (s *Store) BackupTo(ctx context.Context, path string) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer conn.Close()
	return backupConn(ctx, conn, path)
}

// BackupFile copies the database file src (in use by a running server or not) into path, a file
// that must not exist yet, for `carryover backup` run beside the server.
func BackupFile(ctx context.Context, src, path string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	db, err := sql.Open("sqlite3", "file:"+src+"?_busy_timeout=5000")
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer conn.Close()
	return backupConn(ctx, conn, path)
}

func backupConn(ctx context.Context, src *sql.Conn, path string) error {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: %s already exists", path)
	}
	dst, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer dst.Close()
	dconn, err := dst.Conn(ctx)
	if err != nil {
		return fmt.Errorf("backup: create %s: %w", path, err)
	}
	defer dconn.Close()
	err = dconn.Raw(func(d any) error {
		return src.Raw(func(s any) error {
			b, err := d.(*sqlite3.SQLiteConn).Backup("main", s.(*sqlite3.SQLiteConn), "main")
			if err != nil {
				return err
			}
			for {
				done, err := b.Step(-1)
				if err != nil {
					b.Close()
					return err
				}
				if done {
					return b.Close()
				}
				// Busy or locked (a writer of another process in a rollback journal): try again.
				select {
				case <-ctx.Done():
					b.Close()
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	})
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	return nil
}

// ChangeWatch tells whether the store committed anything since it last looked (PRAGMA
// data_version on a connection of its own, which counts the commits of every other connection),
// so a replicator takes no snapshot of an idle store.
type ChangeWatch struct {
	db   *sql.DB
	conn *sql.Conn
	last int64
}

// WatchChanges opens a connection of its own (not one of the store's pool) until Close.
func (s *Store) WatchChanges(ctx context.Context) (*ChangeWatch, error) {
	db, err := sql.Open("sqlite3", dsn(s.path, true, SyncFull))
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &ChangeWatch{db: db, conn: conn, last: -1}, nil
}

// Changed reports whether a commit happened since the previous call (true on the first).
func (w *ChangeWatch) Changed(ctx context.Context) (bool, error) {
	var v int64
	if err := w.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return false, err
	}
	changed := v != w.last
	w.last = v
	return changed, nil
}

// Close closes its connection.
func (w *ChangeWatch) Close() error {
	w.conn.Close()
	return w.db.Close()
}

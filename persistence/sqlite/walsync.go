package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// Why the store flushes the WAL itself under synchronous=full: SQLite's FULL is NORMAL plus one sync
// of the WAL file after each commit (https://sqlite.org/pragma.html#pragma_synchronous, WAL mode).
// A turn commits ~8 times (its checkpoint's chunks and manifest, the prune, the session twice, its
// history entry, its idempotency key); at one fdatasync each that was most of a `1+1` turn. So the
// connections run NORMAL and writeTx syncs the WAL after each commit, as FULL would, except for a
// write made under carryover.DeferSync: the turn calls Sync once before it answers, and one
// fdatasync covers every frame written before it. Concurrent Syncs share a flush (group commit).

// walSync flushes the WAL file of one database.
type walSync struct {
	wal, dir string
	mu       sync.Mutex    // one flush at a time; waiters find theirs done by the one before
	written  atomic.Uint64 // commits whose frames are in the WAL (incremented after each commit)
	synced   atomic.Uint64 // commits known durable: written as read before the last flush began
	dirIno   uint64        // the WAL file whose directory entry was synced (a new WAL needs it)
}

func newWALSync(dbPath string) *walSync {
	return &walSync{wal: dbPath + "-wal", dir: filepath.Dir(dbPath)}
}

// committed counts a commit whose frames are written (not yet flushed).
func (w *walSync) committed() { w.written.Add(1) }

// sync returns once every commit counted before it was called is on disk.
func (w *walSync) sync() error {
	target := w.written.Load()
	if w.synced.Load() >= target {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.synced.Load() >= target { // a flush that began after our commits covered them
		return nil
	}
	upTo := w.written.Load()
	if err := w.flush(); err != nil {
		return fmt.Errorf("sqlite: sync the WAL: %w", err)
	}
	w.synced.Store(upTo)
	return nil
}

// flush fdatasyncs the WAL file (what SQLite's FULL does after a commit) and, the first time it
// sees a new WAL file, its directory, so that the file itself survives a power cut (SQLite syncs a
// new journal's directory on its first sync too). No WAL file: the last connection closed and
// SQLite checkpointed it into the database, which it synced.
func (w *walSync) flush() error {
	f, err := os.Open(w.wal)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino == w.dirIno {
		return nil
	}
	d, err := os.Open(w.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return err
	}
	w.dirIno = st.Ino
	return nil
}

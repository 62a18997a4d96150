// Package sqlite is carryover's embedded store: one SQLite file holding sessions, their event logs,
// executions and tools, and checkpoints as a content-addressed Merkle DAG of chunks. It implements
// carryover.Store; persistence/storetest is the contract it is tested against. Only the Go server
// writes the file (WAL, foreign keys on, schema from embedded migrations).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/carryover/carryover"
	"github.com/jmoiron/sqlx"
)

// pageSize is the SQLite page size of a new database; it only takes effect before the first table
// exists (a database made with another keeps its own). Every page a commit changes is written whole
// to the WAL (and checksummed, then copied back by the checkpoint): a `1+1` turn's records changed
// ~12 pages, ~780 KiB at 64 KiB a page; at 16 KiB they change ~17 (the b-trees are deeper), ~280
// KiB (strace of 50 turns). Multi-MiB chunk blobs still chain few enough overflow pages to read
// and write as fast (BenchmarkChunkReads, BenchmarkPutChunks: within the noise of 64 KiB; 4 and 8
// KiB read 20-25% slower, and 4 KiB wrote a third slower). `make bench --only server`, builds
// alternated four times: the `1+1` POST /run 1.62-1.85x raw ZMQ (median 1.67x) against
// 1.75-2.00x (1.91x), its records' part 2.2-2.9 ms against 2.8-3.2 ms.
const pageSize = 16384

// Store is carryover's SQLite database. Only the Go server writes it: every write transaction runs under
// wmu, so writers never meet SQLITE_BUSY from each other, while reads go through the pool concurrently
// (WAL lets them proceed beside the single writer).
type Store struct {
	db   *sqlx.DB
	path string

	wmu sync.Mutex // serialises write transactions
	// wconn is the one connection every write runs on (under wmu): a write never waits for the
	// readers' pool, and its page cache stays valid from one commit to the next (writer.go).
	wconn *sqlx.Conn
	wal   *walCheckpointer
	// flush is the WAL's own sync under synchronous=full (walsync.go); nil under normal.
	flush *walSync
	ckmu  sync.RWMutex // shared by each open CheckpointWriter; GC takes it exclusively

	readStmt  *sql.Stmt // SELECT codec, raw_len, data FROM chunks WHERE hash = ?
	existStmt *sql.Stmt // SELECT 1 FROM chunks WHERE hash = ?
}

var (
	_ carryover.Store  = (*Store)(nil)
	_ carryover.Syncer = (*Store)(nil)
)

// Synchronous is SQLite's synchronous mode for the store's connections: what a commit waits for.
type Synchronous string

const (
	// SyncFull fsyncs the WAL at every commit: once a turn is answered its checkpoint and record are on
	// disk and survive a power cut (persistence/sqlite/powercut_test.go). Each commit pays an fsync.
	SyncFull Synchronous = "full"
	// SyncNormal fsyncs only at WAL checkpoints: a crash or kill -9 loses nothing, but a power cut
	// loses the commits no WAL checkpoint has synced yet (measured: docs/chaos.md#a-power-cut).
	SyncNormal Synchronous = "normal"
)

// Options are the choices Open leaves to the operator.
type Options struct {
	// Synchronous is the durability of a commit; "" is SyncFull.
	Synchronous Synchronous
}

// ParseSynchronous reads the config's spelling of a synchronous mode ("full" or "normal", any case;
// "" is full). Anything else is an error naming the choices.
func ParseSynchronous(s string) (Synchronous, error) {
	switch Synchronous(strings.ToLower(s)) {
	case "", SyncFull:
		return SyncFull, nil
	case SyncNormal:
		return SyncNormal, nil
	}
	return "", fmt.Errorf("sqlite synchronous must be full or normal, got %q", s)
}

// Open opens (creating if needed) the SQLite database at path with the default Options (synchronous
// FULL) and brings its schema up to date.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with the operator's Options.
func OpenWith(path string, o Options) (*Store, error) {
	mode, err := ParseSynchronous(string(o.Synchronous))
	if err != nil {
		return nil, err
	}
	if err := prepareNewFile(path); err != nil {
		return nil, err
	}
	// Under full the connections run NORMAL and the store syncs the WAL after each commit itself
	// (walsync.go), so that a turn's commits can share one sync.
	db, err := sqlx.Open(driverName, dsn(path, false, SyncNormal))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Reads are concurrent under WAL; each connection costs a page cache, so cap the pool (plus the
	// writer's own connection).
	n := max(4, runtime.GOMAXPROCS(0)) + 1
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	s := &Store{db: db, path: path}
	if s.wconn, err = openWriter(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if mode == SyncFull {
		s.flush = newWALSync(path)
	}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	if err := s.checkFormat(context.Background()); err != nil {
		db.Close()
		return nil, err
	}
	if s.flush != nil { // the migrations' commits (made outside writeTx)
		s.flush.committed()
		if err := s.flush.sync(); err != nil {
			db.Close()
			return nil, err
		}
	}
	if s.readStmt, err = db.Prepare(`SELECT codec, raw_len, data FROM chunks WHERE hash = ?`); err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare chunk read: %w", err)
	}
	if s.existStmt, err = db.Prepare(`SELECT 1 FROM chunks WHERE hash = ?`); err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare chunk exists: %w", err)
	}
	s.wal = startWALCheckpointer(db.DB, &s.wmu)
	return s, nil
}

// stmtCacheSize is how many prepared statements each connection keeps (the driver's LRU): more
// than the distinct queries a turn and the background loops make.
const stmtCacheSize = 128

// dsn builds the go-sqlite3 connection string. _txlock=immediate makes every transaction take the write
// lock at BEGIN, so a transaction never fails half-way when it upgrades from reading to writing (it can
// only wait, up to busy_timeout, for a writer of another process such as the sqlite3 shell).
// _synchronous is the operator's durability choice (Options.Synchronous). _stmt_cache_size keeps each
// connection's prepared statements for the next call of the same query: a turn makes ~20 calls, and
// preparing each again was ~8% of the server's CPU in a profile of `1+1` turns (12-18% of the user
// CPU of BenchmarkCommitTurn).
func dsn(path string, bootstrap bool, mode Synchronous) string {
	q := url.Values{}
	q.Set("_busy_timeout", "5000")
	if !bootstrap {
		q.Set("_stmt_cache_size", strconv.Itoa(stmtCacheSize))
		q.Set("_journal_mode", "WAL")
		q.Set("_foreign_keys", "on")
		q.Set("_synchronous", strings.ToUpper(string(mode)))
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// prepareNewFile sets the page size and auto_vacuum of a database that does not exist yet. Both are
// fixed once the first page is written, and the WAL pragma of the normal DSN would write it, so a fresh
// file gets them on a plain connection first. An existing non-empty file is left as it is.
func prepareNewFile(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	db, err := sql.Open("sqlite3", dsn(path, true, SyncFull))
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer db.Close()
	for _, p := range []string{
		fmt.Sprintf("PRAGMA page_size = %d", pageSize),
		// incremental: GC can hand freed pages back to the file system without a full VACUUM.
		"PRAGMA auto_vacuum = INCREMENTAL",
		"PRAGMA journal_mode = WAL",
	} {
		if _, err := db.Exec(p); err != nil {
			return fmt.Errorf("create %s: %s: %w", path, p, err)
		}
	}
	return nil
}

// Close closes the database. It does not wait for callers still using the store.
func (s *Store) Close() error {
	if s.wal != nil {
		s.wal.close()
	}
	if s.readStmt != nil {
		s.readStmt.Close()
	}
	if s.existStmt != nil {
		s.existStmt.Close()
	}
	if s.wconn != nil {
		s.wconn.Close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// writeTx runs fn in a write transaction under the writer mutex, committing when fn returns nil.
// Under synchronous=full the commit is durable when writeTx returns, unless ctx carries
// carryover.DeferSync: then it is once Sync returns.
func (s *Store) writeTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	if err := s.commitTx(ctx, fn); err != nil {
		return err
	}
	if s.flush != nil && !carryover.SyncDeferred(ctx) {
		return s.flush.sync()
	}
	return nil
}

// commitTx is writeTx without the flush.
func (s *Store) commitTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if s.flush != nil {
		s.flush.committed()
	}
	if s.wal != nil {
		s.wal.committed()
	}
	return nil
}

// Sync makes every commit made so far durable (carryover.Syncer): the one flush of the writes a
// turn made under carryover.DeferSync. Under synchronous=normal it does nothing, as each commit does.
func (s *Store) Sync(context.Context) error {
	if s.flush == nil {
		return nil
	}
	return s.flush.sync()
}

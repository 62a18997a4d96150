package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Why WAL checkpoints run in the background: SQLite's automatic checkpoint runs inside the COMMIT
// that pushes the WAL past wal_autocheckpoint pages, and it copies the WAL into the database and
// fsyncs both. With 64 KiB pages (16 KiB now: store.go's pageSize) a turn's records filled ~15
// pages, so every ~66th turn paid the whole checkpoint in its own latency (57-65 ms on this VM
// against a 7 ms turn: the `1+1` p99).
// A passive checkpoint takes no writer lock, so it runs beside new commits; the turn pays nothing.

const (
	// driverName is go-sqlite3 with walBackstopPages as every connection's wal_autocheckpoint.
	driverName = "sqlite3_carryover"
	// walBackstopPages keeps SQLite's own checkpoint as a backstop (160 MiB of 16 KiB pages, 640
	// MiB in a database made with 64 KiB pages): it only fires if the background checkpointer
	// falls that far behind, so the WAL stays bounded.
	walBackstopPages = 10000
	// walCheckpointDelay batches commits: a checkpoint runs this long after the first commit that
	// followed the previous one, so a busy server checkpoints at most this often.
	walCheckpointDelay = 500 * time.Millisecond
)

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", walBackstopPages), nil)
		return err
	}})
}

// walCheckpointer runs PRAGMA wal_checkpoint(PASSIVE) off the commit path, walCheckpointDelay after
// commits (kick), and stops with the store.
type walCheckpointer struct {
	db   *sql.DB
	wmu  *sync.Mutex // the store's writer mutex, held for the short second pass
	kick chan struct{}
	stop chan struct{}
	done sync.WaitGroup
}

func startWALCheckpointer(db *sql.DB, wmu *sync.Mutex) *walCheckpointer {
	w := &walCheckpointer{db: db, wmu: wmu, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	w.done.Add(1)
	go w.loop()
	return w
}

// committed tells the checkpointer the WAL grew; it never blocks.
func (w *walCheckpointer) committed() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *walCheckpointer) loop() {
	defer w.done.Done()
	for {
		select {
		case <-w.kick:
		case <-w.stop:
			return
		}
		select {
		case <-time.After(walCheckpointDelay):
		case <-w.stop:
			return
		}
		w.checkpoint()
	}
}

// checkpoint backfills the WAL into the database in two passes. The first runs beside new commits
// and does the bulk of the copying and syncing. Commits that keep coming during it would keep the
// WAL from ever starting over (SQLite rewinds it only when every frame is backfilled), so the second
// pass runs under the writer mutex and copies just what was appended meanwhile: the next commit then
// rewinds the WAL. A commit waits for at most that short second pass.
func (w *walCheckpointer) checkpoint() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.pass(ctx); err != nil {
		slog.Warn("sqlite: background WAL checkpoint failed; SQLite's own checkpoint stays the backstop", "err", err)
		return
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.pass(ctx); err != nil {
		slog.Warn("sqlite: background WAL checkpoint failed; SQLite's own checkpoint stays the backstop", "err", err)
	}
}

// pass runs one passive checkpoint. Busy (a reader holds an old snapshot) is not an error: the next
// commit kicks another pass.
func (w *walCheckpointer) pass(ctx context.Context) error {
	var busy, logFrames, done int
	return w.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &done)
}

// close stops the loop; SQLite checkpoints the WAL itself when the last connection closes.
func (w *walCheckpointer) close() {
	close(w.stop)
	w.done.Wait()
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Why every write runs on one connection of its own. First, a write never waits for the pool:
// readers (restores streaming chunks, exports, listings) can hold every pooled connection for a
// while, and a write drawn from the pool then waited for one while holding the writer mutex, so
// every session's turn queued behind the slowest reader. Second, its page cache stays warm: under
// WAL a connection drops its cache whenever another connection committed since its last
// transaction, and with writes spread over the pool each began on a cache another writer had just
// made stale, reading the b-tree pages a turn touches (64 KiB each) again. The writer's own commits
// keep its cache valid. Writes are serialised by the writer mutex anyway, so one connection costs
// no concurrency. Measured (`make bench --only server`, builds alternated three times): 50
// sessions x 100 runs 258, 261 and 274 runs/s against 238, 234 and 259; a lone session's `1+1`
// unchanged within the noise (one session's writes mostly found the connection they used last).

// writerCacheKiB is the writer connection's page cache: the pages a busy node's turns keep
// touching (the interior and hot leaf pages of every table and index a turn writes), sized for
// databases made with 64 KiB pages (before pageSize was 16 KiB), with room to spare. SQLite's
// default (2 MiB: 31 such pages) is about what one `1+1` turn touched at 64 KiB (15 leaves
// written, plus the roots and interior pages above them).
const writerCacheKiB = 32 << 10

// openWriter takes the writer's connection out of db's pool and sizes its cache.
func openWriter(db *sqlx.DB) (*sqlx.Conn, error) {
	c, err := db.Connx(context.Background())
	if err != nil {
		return nil, fmt.Errorf("writer connection: %w", err)
	}
	if _, err := c.ExecContext(context.Background(), fmt.Sprintf("PRAGMA cache_size = -%d", writerCacheKiB)); err != nil {
		c.Close()
		return nil, fmt.Errorf("writer connection: cache size: %w", err)
	}
	return c, nil
}

// beginWrite begins a write transaction on the writer's connection. A connection database/sql
// has given up on (sql.ErrConnDone: the driver reported it bad) is replaced once, so one failure
// does not refuse every later write. Caller holds wmu.
func (s *Store) beginWrite(ctx context.Context) (*sqlx.Tx, error) {
	tx, err := s.wconn.BeginTxx(ctx, nil)
	if !errors.Is(err, sql.ErrConnDone) {
		return tx, err
	}
	if err := s.replaceWriter(); err != nil {
		return nil, err
	}
	return s.wconn.BeginTxx(ctx, nil)
}

// writerQuery runs a query on the writer's connection outside a transaction (a pragma that writes,
// as incremental_vacuum), replacing a connection given up on as beginWrite does. Caller holds wmu.
func (s *Store) writerQuery(ctx context.Context, query string) (*sql.Rows, error) {
	rows, err := s.wconn.QueryContext(ctx, query)
	if !errors.Is(err, sql.ErrConnDone) {
		return rows, err
	}
	if err := s.replaceWriter(); err != nil {
		return nil, err
	}
	return s.wconn.QueryContext(ctx, query)
}

// replaceWriter swaps the writer's connection for a new one. Caller holds wmu.
func (s *Store) replaceWriter() error {
	c, err := openWriter(s.db)
	if err != nil {
		return err
	}
	s.wconn.Close()
	s.wconn = c
	return nil
}

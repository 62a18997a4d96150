// Package postgres is carryover's store on PostgreSQL, for a cluster of nodes sharing one database:
// sessions, their event logs, executions and tools, and the checkpoint catalog (chunks as a
// content-addressed Merkle DAG, small ones inline, large ones in an object store when one is given).
// It implements carryover.Store and passes persistence/storetest, the same contract as
// persistence/sqlite. It talks to PostgreSQL through pgx's database/sql driver under sqlx.
//
// Everything that must hold across nodes is in the database, never in a process: event numbers come
// from a counter on the session row, GC is fenced from checkpoint writers by a row lock and pins, not
// by a mutex (another node's writer is invisible to a mutex).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"
)

// Options tune a Store; the zero value is a store with every chunk inline.
type Options struct {
	// MaxConns caps the connection pool (default 16).
	MaxConns int
	// WriterMaxAge is how long a checkpoint writer that never closed (its node died) keeps its chunks
	// from GC (default 6h).
	WriterMaxAge time.Duration

	// Objects, when set, holds chunks larger than InlineMax as objects (the catalog stays here).
	Objects ObjectStore
	// InlineMax is the largest stored chunk kept inline in PostgreSQL when Objects is set (default
	// 64 KiB): small chunks cost a row, not an object request.
	InlineMax int
	// PackMax is the most stored bytes of one put's large chunks uploaded together as one object (a
	// pack; default 4 MiB; < 0: each chunk its own object, as before migration 0010, which a node of
	// an older build still running beside this one needs to read them).
	PackMax int
	// ObjectPrefix starts every object key (default "chunks/").
	ObjectPrefix string
	// CacheDir, when set, is this node's cache of object chunks by hash (restores read it first).
	CacheDir string
	// CacheMaxBytes bounds the cache: past it, the least recently used chunks are deleted (default 10 GiB).
	CacheMaxBytes int64
	// TombstoneGrace is how long GC waits before deleting the object of a collected chunk (default 1m).
	TombstoneGrace time.Duration
	// Node, when its ID is set, makes the store one node of a cluster: sessions it creates are owned
	// by it, and its session-scoped writes are fenced by the epochs it holds (ownership.go).
	Node carryover.NodeInfo
	// OrphanAge is the age past which an object the catalog does not name (an upload whose catalog
	// transaction never committed) is deleted by GC (default 24h).
	OrphanAge time.Duration
	// MaxFormat is the newest checkpoint format this node announces and reads (0: format.Newest).
	// A test hook (cluster.test_max_format): a lower value makes the node act as an older build.
	MaxFormat int

	// noPoolCheck leaves out the pool's check of a connection before reuse (discardDead), so that a
	// test sees the retries alone.
	noPoolCheck bool
}

// ObjectStore is where large chunks live: a bucket of an S3-compatible store (persistence/s3).
type ObjectStore interface {
	Put(ctx context.Context, key string, data []byte) error
	// PutParts stores the concatenation of parts under key (a pack), without copying them.
	PutParts(ctx context.Context, key string, parts [][]byte) error
	// Get returns an error wrapping carryover.ErrMissingChunk when key has no object.
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, keys []string) error
	List(ctx context.Context, prefix string, fn func(key string, modified time.Time) error) error
}

// Store is carryover's PostgreSQL database.
type Store struct {
	db    *sqlx.DB
	opts  Options
	held  holds       // the sessions this node owns, with their epochs (clustered stores only)
	cache *chunkCache // this node's chunk cache (nil: none)
	packs packReads   // the last packs this node read whole

	lostLogged  atomic.Int64 // when a lost connection was last logged (unix ns; connlost.go)
	lostRetries atomic.Int64 // statements and transactions run again after a lost connection

	writeFormat    atomic.Int64 // the checkpoint format the cluster writes, as of the last heartbeat (format.go)
	recordedFormat atomic.Int64 // the highest format this node recorded in store_meta

	// testHookBeforePutTx, when set, runs between a put's uploads and its catalog transaction (the
	// window a racing GC is tested in).
	testHookBeforePutTx func()
	// testHookBeforeCommit, when set, runs in tx between fn and the COMMIT.
	testHookBeforeCommit func(tx *sqlx.Tx)
}

var _ carryover.Store = (*Store)(nil)

// Open connects to the database named by dsn (a libpq URL or key=value string; several hosts with
// target_session_attrs=read-write find the primary after a failover) and brings its schema up to date.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	if opts.WriterMaxAge <= 0 {
		opts.WriterMaxAge = 6 * time.Hour
	}
	if opts.InlineMax <= 0 {
		opts.InlineMax = 64 << 10
	}
	if opts.PackMax == 0 {
		opts.PackMax = 4 << 20
	}
	if opts.ObjectPrefix == "" {
		opts.ObjectPrefix = "chunks/"
	}
	if opts.TombstoneGrace <= 0 {
		opts.TombstoneGrace = time.Minute
	}
	if opts.OrphanAge <= 0 {
		opts.OrphanAge = 24 * time.Hour
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	var check []stdlib.OptionOpenDB
	if !opts.noPoolCheck {
		check = append(check, stdlib.OptionResetSession(discardDead))
	}
	db := sqlx.NewDb(stdlib.OpenDB(*cfg, check...), "pgx")
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, opts: opts}
	if opts.CacheDir != "" {
		if opts.CacheMaxBytes <= 0 {
			opts.CacheMaxBytes = 10 << 30
		}
		s.cache = openChunkCache(opts.CacheDir, opts.CacheMaxBytes)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate postgres: %w", err)
	}
	if err := s.checkFormat(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if !s.clustered() { // no heartbeat will set the format: a single node writes (and records) its newest
		if _, err := s.WriteFormat(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	return s, nil
}

// DB is the connection pool, for the parts of a cluster (nodes, ownership) that share the database.
func (s *Store) DB() *sqlx.DB { return s.db }

// Close closes the pool, once the cache's writes behind uploads are done.
func (s *Store) Close() error {
	s.cache.settle()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close postgres: %w", err)
	}
	return nil
}

// tx runs fn in a transaction, committing when it returns nil. A transaction whose connection was
// lost before its COMMIT was sent (BEGIN or a statement in fn failed: the server rolled it back) runs
// again on another connection (connlost.go), so fn must do nothing outside tx that it cannot do
// twice. A failed COMMIT is never run again: whether it took effect is unknown.
func (s *Store) tx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	return s.retryLost(ctx, func() (bool, error) {
		committing, err := s.txOnce(ctx, fn)
		return !committing && connLost(err), err
	})
}

// txOnce is one attempt of tx; committing reports whether the COMMIT was sent.
func (s *Store) txOnce(ctx context.Context, fn func(tx *sqlx.Tx) error) (committing bool, err error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return false, err
	}
	if s.testHookBeforeCommit != nil {
		s.testHookBeforeCommit(tx)
	}
	if err := tx.Commit(); err != nil {
		return true, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// PostgreSQL error codes the store gives a meaning.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// isCode reports whether err is a PostgreSQL error of that SQLSTATE.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// constraintOf is the constraint a PostgreSQL error names ("" when none).
func constraintOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.ConstraintName
	}
	return ""
}

// Times are stored as nanoseconds since the epoch (see migrations/0001_init.sql).

// nsOf is t in stored form; a zero t means now.
func nsOf(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UnixNano()
}

// timeOf is a stored time as the store hands it back: UTC.
func timeOf(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// jsonText turns a JSON document into the TEXT stored for it; empty means def.
func jsonText(b []byte, def string) string {
	if len(b) == 0 {
		return def
	}
	return string(b)
}

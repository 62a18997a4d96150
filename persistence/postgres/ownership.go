package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/format"
	"github.com/jmoiron/sqlx"
)

// Ownership of sessions by the nodes of a cluster (carryover.Ownership). A store opened with
// Options.Node set is one node's view: it creates sessions owned by itself, claims and releases
// sessions, and fences every session-scoped write on the (node, epoch) it holds, so a write of a node
// that lost the session affects no row and fails with CodeNotOwner. Without Options.Node (one node)
// writes are not fenced and nobody owns anything.

var _ carryover.Ownership = (*Store)(nil)

// holds is the epochs this node holds, by session.
type holds struct {
	mu sync.Mutex
	m  map[string]int64
}

func (h *holds) get(id string) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[id]
	return e, ok
}

func (h *holds) set(id string, epoch int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]int64{}
	}
	h.m[id] = epoch
}

func (h *holds) drop(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, id)
}

func (h *holds) all() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int64, len(h.m))
	for k, v := range h.m {
		out[k] = v
	}
	return out
}

// clustered reports whether the store is a node of a cluster.
func (s *Store) clustered() bool { return s.opts.Node.ID != "" }

// fenceArgs are the two parameters of fenceSQL for session id: (NULL, 0) when not clustered (no
// fence), else this node and the epoch it holds (-1 when it holds none: every fenced write fails).
func (s *Store) fenceArgs(id string) (any, int64) {
	if !s.clustered() {
		return nil, 0
	}
	e, ok := s.held.get(id)
	if !ok {
		return s.opts.Node.ID, -1
	}
	return s.opts.Node.ID, e
}

// fenceSQL is the condition on a sessions row (alias-free) that a fenced write adds; $N and $N+1 are
// the fence arguments.
func fenceSQL(n int) string {
	return fmt.Sprintf(`($%d::text IS NULL OR (owner_node = $%d AND owner_epoch = $%d))`, n, n, n+1)
}

// fenceFailed explains a fenced write that affected no row: the session does not exist, or this node
// does not own it (any more: its hold is dropped).
func (s *Store) fenceFailed(ctx context.Context, q sqlx.QueryerContext, id string) error {
	var owner sql.NullString
	err := sqlx.GetContext(ctx, q, &owner, `SELECT owner_node FROM sessions WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.Errorf(carryover.CodeNotFound, "session %q not found", id)
	}
	if err != nil {
		return fmt.Errorf("session %q: %w", id, err)
	}
	s.held.drop(id)
	return carryover.Errorf(carryover.CodeNotOwner, "session %q is not owned by node %s (owner: %q)", id, s.opts.Node.ID, owner.String).
		WithDetails("session_id", id, "owner_node", owner.String)
}

// lockFenced takes session id's row FOR SHARE in tx when this node may write it: a claim by another
// node waits for tx, and tx fails if the claim came first.
func (s *Store) lockFenced(ctx context.Context, tx *sqlx.Tx, id string) error {
	node, epoch := s.fenceArgs(id)
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND `+fenceSQL(2)+` FOR SHARE`, id, node, epoch).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return s.fenceFailed(ctx, tx, id)
	}
	if err != nil {
		return fmt.Errorf("session %q: %w", id, err)
	}
	return nil
}

// aliveSQL is true for a nodes row n whose heartbeat has not expired (database clock).
const aliveSQL = `(n.heartbeat_at + n.ttl_ms * interval '1 millisecond' > now())`

// frozenHeartbeatFloor is the least time PostgreSQL lets a heartbeat's transaction sit idle: a
// tiny TTL (the tests' 1 ms) must not end a live heartbeat between two of its statements.
const frozenHeartbeatFloor = 5 * time.Second

// Heartbeat records this node as alive for ttl from now, with its advertised address, the newest
// checkpoint format it reads (format.go) and its load (Nodes).
// A node that reads less than the store's recorded format (the cluster switched to a newer one
// while this node was away, or as it started) is refused instead: its heartbeat fails, so it does
// not serve (formatLock).
//
// The transaction holds formatLock shared, so a node frozen in it (a SIGSTOP, a VM paused, a stall)
// would keep the cluster's format switch waiting for as long as it is frozen, and every heartbeat
// queued behind that switch's exclusive request with it. PostgreSQL ends such a session once it
// has been idle in the transaction for ttl (at least frozenHeartbeatFloor): by then its node is
// dead to the cluster anyway. A live heartbeat ended so (its process descheduled that long) fails
// before its commit, so it is retried on a new connection (connLost).
func (s *Store) Heartbeat(ctx context.Context, ttl time.Duration, load carryover.NodeLoad) error {
	err := s.tx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`,
			strconv.FormatInt(max(ttl, frozenHeartbeatFloor).Milliseconds(), 10)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, formatLock); err != nil {
			return err
		}
		var v sql.NullInt64
		if err := tx.GetContext(ctx, &v, `SELECT max(value) FROM store_meta WHERE name = 'format'`); err != nil {
			return fmt.Errorf("read the store's format: %w", err)
		}
		if v.Valid && int(v.Int64) > s.MaxFormat() {
			return format.NewerStore("the PostgreSQL store", int(v.Int64), s.MaxFormat())
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, addr, heartbeat_at, ttl_ms, max_format,
				live_kernels, max_live_kernels, queued, idle_kernels, load_at)
			VALUES ($1, $2, now(), $3, $4, $5, $6, $7, $8, now())
			ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, heartbeat_at = now(), ttl_ms = excluded.ttl_ms,
				max_format = excluded.max_format, live_kernels = excluded.live_kernels,
				max_live_kernels = excluded.max_live_kernels, queued = excluded.queued,
				idle_kernels = excluded.idle_kernels, load_at = now()`,
			s.opts.Node.ID, s.opts.Node.Addr, ttl.Milliseconds(), s.MaxFormat(),
			load.Live, load.Capacity, load.Queued, load.Idle)
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat of node %s: %w", s.opts.Node.ID, err)
	}
	// The cluster's format follows the live nodes; a failure here must not fail the heartbeat (the
	// node would fence itself): the next heartbeat tries again.
	_, _ = s.WriteFormat(ctx)
	return nil
}

// Claim makes this node the owner of session id when nobody alive owns it (see carryover.Ownership).
// The claiming node must itself be alive. One UPDATE: under concurrent claims PostgreSQL re-checks the
// condition on the row the first claim wrote, so the second finds a live owner and affects nothing.
func (s *Store) Claim(ctx context.Context, id string) (int64, error) {
	if !s.clustered() {
		return 0, fmt.Errorf("claim %q: the store is not a cluster node (no node id)", id)
	}
	var epoch int64
	err := s.db.QueryRowContext(ctx, `UPDATE sessions s SET owner_node = $2, owner_epoch = s.owner_epoch + 1
		WHERE s.id = $1
		  AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = $2 AND `+aliveSQL+`)
		  AND (s.owner_node IS NULL OR s.owner_node = $2
		       OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = s.owner_node AND `+aliveSQL+`))
		RETURNING s.owner_epoch`, id, s.opts.Node.ID).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		o, oerr := s.Owner(ctx, id)
		if oerr != nil {
			return 0, oerr
		}
		return 0, carryover.Errorf(carryover.CodeNotOwner, "session %q is owned by node %s", id, o.Node).
			WithDetails("session_id", id, "owner_node", o.Node, "owner_addr", o.Addr)
	}
	if err != nil {
		return 0, fmt.Errorf("claim session %q: %w", id, err)
	}
	s.held.set(id, epoch)
	return epoch, nil
}

// Release gives session id up if this node still holds it at its epoch; the epoch stays, so the next
// claim (by any node) bumps it past every write this node could still attempt.
func (s *Store) Release(ctx context.Context, id string) error {
	node, epoch := s.fenceArgs(id)
	s.held.drop(id)
	if node == nil {
		return nil
	}
	if _, err := s.execSame(ctx, `UPDATE sessions SET owner_node = NULL WHERE id = $1 AND owner_node = $2 AND owner_epoch = $3`,
		id, node, epoch); err != nil {
		return fmt.Errorf("release session %q: %w", id, err)
	}
	return nil
}

// Owner returns the live owner of session id (Node "" when nobody alive owns it).
func (s *Store) Owner(ctx context.Context, id string) (carryover.Owner, error) {
	var row struct {
		Node  sql.NullString `db:"owner_node"`
		Addr  sql.NullString `db:"addr"`
		Epoch int64          `db:"owner_epoch"`
		Alive sql.NullBool   `db:"alive"`
	}
	err := s.get(ctx, &row, `SELECT s.owner_node, n.addr, s.owner_epoch, `+aliveSQL+` AS alive
		FROM sessions s LEFT JOIN nodes n ON n.id = s.owner_node WHERE s.id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return carryover.Owner{}, carryover.Errorf(carryover.CodeNotFound, "session %q not found", id)
	}
	if err != nil {
		return carryover.Owner{}, fmt.Errorf("owner of session %q: %w", id, err)
	}
	o := carryover.Owner{Epoch: row.Epoch}
	if row.Node.Valid && row.Alive.Valid && row.Alive.Bool {
		o.Node, o.Addr = row.Node.String, row.Addr.String
	}
	return o, nil
}

// Owners returns the live owner of every session that has one (sessions nobody serves are absent).
func (s *Store) Owners(ctx context.Context) (map[string]carryover.Owner, error) {
	var rows []struct {
		ID    string `db:"id"`
		Node  string `db:"owner_node"`
		Addr  string `db:"addr"`
		Epoch int64  `db:"owner_epoch"`
	}
	err := s.sel(ctx, &rows, `SELECT s.id, s.owner_node, n.addr, s.owner_epoch
		FROM sessions s JOIN nodes n ON n.id = s.owner_node WHERE `+aliveSQL)
	if err != nil {
		return nil, fmt.Errorf("owners of sessions: %w", err)
	}
	out := make(map[string]carryover.Owner, len(rows))
	for _, r := range rows {
		out[r.ID] = carryover.Owner{Node: r.Node, Addr: r.Addr, Epoch: r.Epoch}
	}
	return out, nil
}

// Held reports the epoch this node holds session id at.
func (s *Store) Held(id string) (int64, bool) { return s.held.get(id) }

// Forget drops every hold of this node without writing: its heartbeat lapsed, so other nodes may
// already own its sessions.
func (s *Store) Forget() {
	s.held.mu.Lock()
	s.held.m = nil
	s.held.mu.Unlock()
}

// ReleaseAll releases every session this node holds (a planned drain) and returns how many.
func (s *Store) ReleaseAll(ctx context.Context) (int, error) {
	n := 0
	for id := range s.held.all() {
		if err := s.Release(ctx, id); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

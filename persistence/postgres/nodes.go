package postgres

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
)

// Nodes returns the live nodes whose last heartbeat wrote their load (load_at = heartbeat_at: a node
// of an older build renews its heartbeat without a load, and is no candidate for placement), in id
// order, so every node reading the same rows ranks them alike.
func (s *Store) Nodes(ctx context.Context) ([]carryover.NodeState, error) {
	var rows []struct {
		ID       string `db:"id"`
		Addr     string `db:"addr"`
		Live     int    `db:"live_kernels"`
		Capacity int    `db:"max_live_kernels"`
		Queued   int    `db:"queued"`
		Idle     int    `db:"idle_kernels"`
	}
	err := s.db.SelectContext(ctx, &rows, `SELECT n.id, n.addr, n.live_kernels, n.max_live_kernels, n.queued, n.idle_kernels
		FROM nodes n WHERE `+aliveSQL+` AND n.load_at = n.heartbeat_at ORDER BY n.id`)
	if err != nil {
		return nil, fmt.Errorf("nodes' load: %w", err)
	}
	out := make([]carryover.NodeState, len(rows))
	for i, r := range rows {
		out[i] = carryover.NodeState{NodeInfo: carryover.NodeInfo{ID: r.ID, Addr: r.Addr},
			Load: carryover.NodeLoad{Live: r.Live, Capacity: r.Capacity, Queued: r.Queued, Idle: r.Idle}}
	}
	return out, nil
}

package postgres

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
)

// Nodes returns the live nodes with their loads, in id order. A load counts only when the node's
// last heartbeat wrote it (load_at = heartbeat_at): a node of an older build renews its heartbeat
// without a load, so its columns are stale or never set (Published false).
func (s *Store) Nodes(ctx context.Context) ([]carryover.NodeState, error) {
	var rows []struct {
		ID       string `db:"id"`
		Addr     string `db:"addr"`
		Live     int    `db:"live_kernels"`
		Capacity int    `db:"max_live_kernels"`
		Queued   int    `db:"queued"`
		Idle     int    `db:"idle_kernels"`
		Known    bool   `db:"known"`
	}
	err := s.sel(ctx, &rows, `SELECT n.id, n.addr, n.live_kernels, n.max_live_kernels, n.queued, n.idle_kernels,
			COALESCE(n.load_at = n.heartbeat_at, false) AS known
		FROM nodes n WHERE `+aliveSQL+` ORDER BY n.id`)
	if err != nil {
		return nil, fmt.Errorf("nodes' load: %w", err)
	}
	out := make([]carryover.NodeState, len(rows))
	for i, r := range rows {
		out[i] = carryover.NodeState{NodeInfo: carryover.NodeInfo{ID: r.ID, Addr: r.Addr},
			Published: r.Known}
		if r.Known {
			out[i].Load = carryover.NodeLoad{Live: r.Live, Capacity: r.Capacity, Queued: r.Queued, Idle: r.Idle}
		}
	}
	return out, nil
}

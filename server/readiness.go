package server

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// warmWaitMax bounds how long readiness waits for the warm pool to fill at start: a pool that cannot
// fill (kernels failing to start) must not keep a serving node out of its load balancer for ever.
const warmWaitMax = 2 * time.Minute

// readiness is GET /readyz: whether a load balancer should send this server new connections.
//   - Not before its warm pool first filled: a node that takes sessions with an empty pool starts
//     each of them cold (seconds under load) while a ready peer would have served them at once. Once
//     full, it stays ready when a burst empties the pool (the pool refills; a node flapping out of
//     the balancer would only move the burst elsewhere).
//   - Not while it drains (SIGTERM): it still serves and forwards what reaches it, but new
//     connections belong to the nodes that will keep serving.
//   - Not, on a cluster node, without a valid lease on the cluster's database.
type readiness struct {
	since    time.Time   // when the server was assembled
	draining atomic.Bool // Shutdown began
	warmed   atomic.Bool // the pool filled once (latched)
}

// readyCheck is GET /readyz's check: nil when ready, else why not.
func (s *Server) readyCheck() error {
	if s.ready.draining.Load() {
		return errors.New("draining: the server is shutting down and hands its sessions over")
	}
	if s.node != nil {
		if err := s.node.Ready(); err != nil {
			return err
		}
	}
	if s.ready.warmed.Load() {
		return nil
	}
	p := s.Svc.Status().Pool
	if p.Idle < p.Size && time.Since(s.ready.since) < warmWaitMax {
		return fmt.Errorf("warming: %d of %d warm kernels", p.Idle, p.Size)
	}
	s.ready.warmed.Store(true)
	return nil
}

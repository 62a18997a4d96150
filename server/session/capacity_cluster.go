package session

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/carryover/carryover"
)

// Load is this node's load as a cluster node publishes it with every heartbeat and weighs it before
// it takes a new session (docs/capacity.md, "Cluster placement"): its slots, its queue, and its idle
// live kernels (what it could hibernate to make room).
func (s *Service) Load() carryover.NodeLoad {
	sl := s.adm.ledger.Stats()
	s.mu.Lock()
	all := make([]*Session, 0, len(s.sessions))
	for _, ls := range s.sessions {
		all = append(all, ls)
	}
	s.mu.Unlock()
	idle := 0
	for _, ls := range all {
		ls.mu.Lock()
		live := ls.kern != nil
		ls.mu.Unlock()
		if live && !ls.lock.Busy() {
			idle++
		}
	}
	return carryover.NodeLoad{Live: sl.Held, Capacity: sl.Max, Queued: sl.Queued, Idle: idle}
}

// inFullCluster turns the node's capacity refusal of a request the cluster router kept here because
// no node had room (carryover.WithClusterFull) into one that says the cluster is full; the node's own
// figures and Retry-After stay.
func inFullCluster(ctx context.Context, err error) error {
	summary := carryover.ClusterFullFrom(ctx)
	var e *carryover.Error
	if summary == "" || !errors.As(err, &e) || e.Code != carryover.CodeCapacity {
		return err
	}
	retry, _ := e.RetryAfter()
	c := *e
	c.Message = fmt.Sprintf("the cluster is at capacity (%s when this request came), and so is this node: %d of %d kernels busy; retry in %d s",
		summary, e.Details["live"], e.Details["capacity"], retry)
	c.Details = maps.Clone(e.Details)
	c.Details["reason"] = "cluster_full"
	return &c
}

package session

import (
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

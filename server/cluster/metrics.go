package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// placements counts placement decisions (placement.go) by where the session went: here, a peer, or
// nowhere (the cluster was full). Fixed labels only: a node id would grow with the cluster.
var placements = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "carryover_cluster_placements_total",
	Help: "New and woken sessions placed by this node while it had no free slot, by where they went (here, peer, full).",
}, []string{"to"})

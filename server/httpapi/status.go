package httpapi

import (
	"net/http"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/nodewatch"
)

// statusRoutes report this node's load (docs/capacity.md): live, hibernated and queued sessions,
// capacity, memory, the warm pool, hibernations and 429s by reason; on a cluster node, the nodes'
// loads that placement weighs.
func (a *API) statusRoutes() []route {
	return []route{{"GET /api/status", http.HandlerFunc(a.status)}}
}

// statusAnswer is GET /api/status: the node's own status, and the cluster's loads on a cluster node.
type statusAnswer struct {
	nodewatch.NodeStatus
	Cluster []clusterNode `json:"cluster,omitempty"`
	Disk    *DiskStatus   `json:"disk,omitempty"`
}

// clusterNode is one live node's load as this node last read it from the shared store.
type clusterNode struct {
	NodeID         string `json:"node_id"`
	LiveKernels    int    `json:"live_kernels"`
	MaxLiveKernels int    `json:"max_live_kernels"`
	Queued         int    `json:"queued"`
	IdleKernels    int    `json:"idle_kernels"`
}

// ShowCluster makes GET /api/status show the cluster's loads, read by view (the cluster node's
// View); the assembly calls it before serving, once the node exists.
func (a *API) ShowCluster(view func() []carryover.NodeState) { a.clusterView = view }

func (a *API) status(w http.ResponseWriter, _ *http.Request) {
	out := statusAnswer{NodeStatus: a.svc.Status()}
	if a.clusterView != nil {
		out.Cluster = []clusterNode{}
		for _, n := range a.clusterView() {
			if !n.Published {
				continue // a node of an older build: no load to show
			}
			out.Cluster = append(out.Cluster, clusterNode{NodeID: n.ID, LiveKernels: n.Load.Live,
				MaxLiveKernels: n.Load.Capacity, Queued: n.Load.Queued, IdleKernels: n.Load.Idle})
		}
	}
	out.Disk = a.disk()
	writeJSON(w, http.StatusOK, out)
}

package cluster

import "net/http"

const createPath = "/api/sessions"

// create places a new session (POST /api/sessions): here when this node has a free slot, else on the
// node with the most room, else 429 (the cluster is full). A create another node placed here is
// never sent on: this node takes it while it has room (a free slot or an idle session to hibernate)
// and refuses it, 429, when the placing node's view was stale.
func (n *Node) create(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Header.Get(HopHeader) != "" {
		if l := n.load(); !l.HasRoom() {
			n.writeError(w, n.nodeFull(l))
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	target, full := n.place()
	switch {
	case full != nil:
		n.writeError(w, n.clusterFull(*full))
	case target == nil:
		next.ServeHTTP(w, r)
	default:
		n.forward(w, r, target.Addr, func(w http.ResponseWriter, err error) {
			n.log.Warn("placing a new session failed", "node", target.ID, "err", err)
			n.writeError(w, n.unreachable(target.ID))
		})
	}
}

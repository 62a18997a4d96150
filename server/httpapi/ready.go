package httpapi

import "net/http"

// GET /readyz is readiness, beside /healthz's liveness: a load balancer sends new connections only to
// a node that answers 200 here. The assembly decides (ShowReadiness): not ready before the warm pool
// first filled, while the node drains (SIGTERM) and, on a cluster node, without a valid lease.
// No credential, like /healthz.

// readyAnswer is GET /readyz: {"status": "ready"}, or 503 {"status": "not_ready", "reason": ...}.
type readyAnswer struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// ShowReadiness makes GET /readyz answer from check (nil: ready whenever the server answers).
func (a *API) ShowReadiness(check func() error) { a.readyCheck = check }

func (a *API) ready(w http.ResponseWriter, _ *http.Request) {
	if a.readyCheck != nil {
		if err := a.readyCheck(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, readyAnswer{Status: "not_ready", Reason: err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, readyAnswer{Status: "ready"})
}

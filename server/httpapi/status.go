package httpapi

import "net/http"

// statusRoutes report this node's load (docs/capacity.md): live, hibernated and queued sessions,
// capacity, memory, the warm pool, hibernations and 429s by reason.
func (a *API) statusRoutes() []route {
	return []route{{"GET /api/status", http.HandlerFunc(a.status)}}
}

func (a *API) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.svc.Status())
}

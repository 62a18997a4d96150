package httpapi

import "net/http"

// inspectRoutes are the read-only endpoints of the UI's variable inspector and checkpoint diff.
func (a *API) inspectRoutes() []route {
	return []route{
		{"GET /api/sessions/{id}/variables", http.HandlerFunc(a.listVariables)},
		{"GET /api/sessions/{id}/checkpoints/{cid}", http.HandlerFunc(a.getCheckpoint)},
	}
}

// listVariables answers the session's variables (name, type, shape, length, size, saved state)
// without running a turn: the execution count does not move.
func (a *API) listVariables(w http.ResponseWriter, r *http.Request) {
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := ls.Variables(r.Context())
	a.reply(w, r, 200, v, err)
}

// getCheckpoint answers one checkpoint's content: variables with type, size and content reference,
// skipped variables, files.
func (a *API) getCheckpoint(w http.ResponseWriter, r *http.Request) {
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := ls.CheckpointDetail(r.Context(), r.PathValue("cid"))
	a.reply(w, r, 200, map[string]any{"checkpoint": d}, err)
}

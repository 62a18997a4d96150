package httpapi

import (
	"encoding/json"
	"mime"
	"net/http"

	"github.com/carryover/carryover"
)

func (a *API) recordRoutes() []route {
	return []route{
		{"GET /api/sessions/{id}/events", http.HandlerFunc(a.listEvents)},
		{"GET /api/sessions/{id}/executions", http.HandlerFunc(a.listExecutions)},
		{"GET /api/sessions/{id}/notebook", http.HandlerFunc(a.notebook)},
		{"POST /api/sessions/{id}/notebook", http.HandlerFunc(a.runNotebook)},
		{"GET /api/sessions/{id}/tools", http.HandlerFunc(a.listTools)},
		{"POST /api/sessions/{id}/tools", http.HandlerFunc(a.registerTool)},
		{"GET /api/sessions/{id}/checkpoints", http.HandlerFunc(a.listCheckpoints)},
		{"POST /api/sessions/{id}/checkpoint", http.HandlerFunc(a.checkpoint)},
		{"POST /api/sessions/{id}/checkpoints/{cid}/restore", http.HandlerFunc(a.restoreCheckpoint)},
		{"GET /api/sessions/{id}/usage", http.HandlerFunc(a.usage)},
	}
}

func (a *API) listEvents(w http.ResponseWriter, r *http.Request) {
	q, err := eventQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	evs, err := a.svc.Events(r.Context(), r.PathValue("id"), q)
	a.reply(w, r, 200, map[string]any{"events": evs}, err)
}

// eventQuery reads GET /events' parameters: after_sequence, before_sequence (0: none), limit
// (default 50, at most 1,000), event_type, and order: asc (the default) or desc, the newest first
// with the limit counted from them, so a page opening a long log lists its end without reading it.
func eventQuery(r *http.Request) (carryover.EventQuery, error) {
	after, err := intParam(r, "after_sequence", 0, 0)
	if err != nil {
		return carryover.EventQuery{}, err
	}
	before, err := intParam(r, "before_sequence", 0, 0)
	if err != nil {
		return carryover.EventQuery{}, err
	}
	limit, err := intParam(r, "limit", 50, 1000)
	if err != nil {
		return carryover.EventQuery{}, err
	}
	typ := r.URL.Query().Get("event_type")
	if typ != "" && !carryover.EventTypeShaped(typ) {
		return carryover.EventQuery{}, carryover.UnknownEventType(typ)
	}
	order := r.URL.Query().Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return carryover.EventQuery{}, carryover.Errorf(carryover.CodeInvalid, "order must be asc or desc, not %q", order).WithDetails("field", "order")
	}
	return carryover.EventQuery{After: int64(after), Before: int64(before), Limit: limit,
		Type: typ, Newest: order == "desc"}, nil
}

func (a *API) listExecutions(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 200, 1000)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ex, err := a.svc.Executions(r.Context(), r.PathValue("id"), limit)
	a.reply(w, r, 200, map[string]any{"executions": ex}, err)
}

func (a *API) listTools(w http.ResponseWriter, r *http.Request) {
	ts, err := a.svc.Tools(r.Context(), r.PathValue("id"))
	a.reply(w, r, 200, map[string]any{"tools": ts}, err)
}

func (a *API) registerTool(w http.ResponseWriter, r *http.Request) {
	var t carryover.Tool
	if err := a.decode(w, r, &t, false); err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := a.svc.RegisterTool(r.Context(), r.PathValue("id"), t)
	a.reply(w, r, http.StatusCreated, map[string]any{"tool": t}, err)
}

func (a *API) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	cps, err := a.svc.Checkpoints(r.Context(), r.PathValue("id"))
	a.reply(w, r, 200, map[string]any{"checkpoints": cps}, err)
}

// usage answers what the session has used: CPU seconds, memory peak, stored bytes (a view of its
// own: stored bytes are listed from the store, too dear for every session document of a list).
func (a *API) usage(w http.ResponseWriter, r *http.Request) {
	u, err := a.svc.Usage(r.Context(), r.PathValue("id"))
	a.reply(w, r, 200, map[string]any{"usage": u}, err)
}

func (a *API) checkpoint(w http.ResponseWriter, r *http.Request) {
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := ls.CheckpointNow(r.Context())
	a.reply(w, r, http.StatusCreated, map[string]any{"checkpoint": res}, err)
}

func (a *API) restoreCheckpoint(w http.ResponseWriter, r *http.Request) {
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := ls.RestoreCheckpoint(r.Context(), r.PathValue("cid"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s, _ := a.svc.Get(r.PathValue("id"))
	writeJSON(w, 200, map[string]any{"session": s.View(), "restore": res})
}

// notebook answers the session's history as an .ipynb download.
func (a *API) notebook(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	b, err := a.svc.Notebook(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ipynb+json")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": id + ".ipynb"}))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// runNotebook runs the code cells of the .ipynb in the body into the session, in order; it stops at
// the first error unless ?continue_on_error=true.
func (a *API) runNotebook(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if err := a.decode(w, r, &raw, false); err != nil {
		a.fail(w, r, err)
		return
	}
	keepGoing, err := boolParam(r, "continue_on_error")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := ls.RunNotebook(r.Context(), raw, keepGoing)
	a.reply(w, r, 200, res, err)
}

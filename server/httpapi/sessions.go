package httpapi

import (
	"context"
	"net/http"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session"
)

func (a *API) sessionRoutes() []route {
	return []route{
		{"POST /api/sessions", http.HandlerFunc(a.createSession)},
		{"GET /api/sessions", http.HandlerFunc(a.listSessions)},
		{"POST /api/sessions/reattach", http.HandlerFunc(a.reattach)},
		{"GET /api/sessions/{id}", http.HandlerFunc(a.getSession)},
		{"PATCH /api/sessions/{id}", http.HandlerFunc(a.patchSession)},
		{"DELETE /api/sessions/{id}", http.HandlerFunc(a.deleteSession)},
		{"PATCH /api/sessions/{id}/context", http.HandlerFunc(a.patchContext)},
		{"POST /api/sessions/{id}/start", http.HandlerFunc(a.lifecycle(Sessions.Start))},
		{"POST /api/sessions/{id}/pause", http.HandlerFunc(a.lifecycle(Sessions.Pause))},
		{"POST /api/sessions/{id}/resume", http.HandlerFunc(a.lifecycle(Sessions.Resume))},
		{"POST /api/sessions/{id}/heartbeat", http.HandlerFunc(a.lifecycle(Sessions.Heartbeat))},
		{"POST /api/sessions/{id}/restart", http.HandlerFunc(a.lifecycle(onHandle((*session.Session).Restart)))},
		{"POST /api/sessions/{id}/rotate", http.HandlerFunc(a.lifecycle(onHandle((*session.Session).Rotate)))},
		{"POST /api/sessions/{id}/hibernate", http.HandlerFunc(a.lifecycle(onHandle((*session.Session).Hibernate)))},
		{"POST /api/sessions/{id}/interrupt", http.HandlerFunc(a.lifecycle(interrupt))},
		{"POST /api/sessions/{id}/stop", http.HandlerFunc(a.finish(Sessions.Stop))},
		{"POST /api/sessions/{id}/cancel", http.HandlerFunc(a.finish(Sessions.Cancel))},
		{"POST /api/sessions/{id}/fork", http.HandlerFunc(a.forkSession)},
	}
}

// forkSession answers 201 with the children: an optional {"session_id", "checkpoint_id", "count"}
// body. "session" is the first child (a fork of one answers it as it always did), "sessions" every
// child in order.
func (a *API) forkSession(w http.ResponseWriter, r *http.Request) {
	var req session.ForkRequest
	if err := a.decode(w, r, &req, true); err != nil {
		a.fail(w, r, err)
		return
	}
	docs, err := a.svc.ForkMany(r.Context(), r.PathValue("id"), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	views := make([]any, len(docs))
	for i, d := range docs {
		views[i] = d.View()
	}
	a.reply(w, r, http.StatusCreated, map[string]any{"session": views[0], "sessions": views}, nil)
}

func sessionBody(s carryover.Session) map[string]any { return map[string]any{"session": s.View()} }

// lifecycle is the handler of an action that takes no body and answers the session.
func (a *API) lifecycle(fn func(Sessions, context.Context, string) (carryover.Session, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := fn(a.svc, r.Context(), r.PathValue("id"))
		a.reply(w, r, 200, sessionBody(s), err)
	}
}

// finish is the handler of stop and cancel: an optional {"reason"} body.
func (a *API) finish(fn func(Sessions, context.Context, string, string) (carryover.Session, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Reason string `json:"reason"`
		}
		if err := a.decode(w, r, &req, true); err != nil {
			a.fail(w, r, err)
			return
		}
		s, err := fn(a.svc, r.Context(), r.PathValue("id"), req.Reason)
		a.reply(w, r, 200, sessionBody(s), err)
	}
}

// interrupt interrupts the run in flight and answers the session.
func interrupt(svc Sessions, ctx context.Context, id string) (carryover.Session, error) {
	ls, err := svc.Session(id)
	if err != nil {
		return carryover.Session{}, err
	}
	if err := ls.Interrupt(ctx); err != nil {
		return carryover.Session{}, err
	}
	return svc.Get(id)
}

// onHandle is fn, an action of a session's handle, as an action on session id.
func onHandle(fn func(*session.Session, context.Context) (carryover.Session, error)) func(Sessions, context.Context, string) (carryover.Session, error) {
	return func(svc Sessions, ctx context.Context, id string) (carryover.Session, error) {
		ls, err := svc.Session(id)
		if err != nil {
			return carryover.Session{}, err
		}
		return fn(ls, ctx)
	}
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request) {
	var req session.CreateRequest
	if err := a.decode(w, r, &req, true); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.svc.Create(r.Context(), req)
	a.reply(w, r, http.StatusCreated, sessionBody(s), err)
}

// listSessions answers the caller's tenant's sessions: all of them, or a page (sessions_page.go).
func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	tenant := carryover.TenantFromContext(r.Context())
	p, err := sessionPageQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	list, err := a.svc.ListAll(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	all := []carryover.Session{}
	for _, s := range list {
		if s.TenantName() == tenant {
			all = append(all, s.View())
		}
	}
	page, next := p.page(all)
	body := map[string]any{"sessions": page}
	if next != "" {
		body["next_cursor"] = next
	}
	writeJSON(w, 200, body)
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	s, err := a.svc.Get(r.PathValue("id"))
	a.reply(w, r, 200, sessionBody(s), err)
}

func (a *API) patchSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Data map[string]any `json:"data"`
	}
	if err := a.decodeChange(w, r, &req, "data"); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.svc.Patch(r.Context(), r.PathValue("id"), req.Data)
	a.reply(w, r, 200, sessionBody(s), err)
}

func (a *API) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.Delete(r.Context(), r.PathValue("id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) reattach(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ClientID string `json:"client_id"`
	}
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.svc.Reattach(r.Context(), req.ClientID)
	a.reply(w, r, 200, sessionBody(s), err)
}

func (a *API) patchContext(w http.ResponseWriter, r *http.Request) {
	var req session.ContextRequest
	if err := a.decodeChange(w, r, &req, "working_dir", "env_vars", "custom_state"); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.svc.PatchContext(r.Context(), r.PathValue("id"), req)
	a.reply(w, r, 200, sessionBody(s), err)
}

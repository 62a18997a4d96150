package httpapi

import (
	"net/http"

	"github.com/carryover/carryover/server/session"
)

func (a *API) turnRoutes() []route {
	return []route{
		{"POST /api/sessions/{id}/run", http.HandlerFunc(a.run)},
		{"POST /api/sessions/{id}/exec", http.HandlerFunc(a.exec)},
		{"POST /api/sessions/{id}/complete", http.HandlerFunc(a.complete)},
		{"POST /api/execute", http.HandlerFunc(a.execute)},
	}
}

func (a *API) run(w http.ResponseWriter, r *http.Request) {
	var req session.RunRequest
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := keyFromHeader(r, &req.IdempotencyKey); err != nil {
		a.fail(w, r, err)
		return
	}
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	replayed := false
	res, err := ls.Run(r.Context(), req, session.RunOptions{OnReplay: func() { replayed = true }})
	markReplayed(w, replayed)
	a.reply(w, r, 200, res, err)
}

func (a *API) exec(w http.ResponseWriter, r *http.Request) {
	var req session.CommandRequest
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := keyFromHeader(r, &req.IdempotencyKey); err != nil {
		a.fail(w, r, err)
		return
	}
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	replayed := false
	res, err := ls.RunCommand(r.Context(), req, session.CommandOptions{OnReplay: func() { replayed = true }})
	markReplayed(w, replayed)
	a.reply(w, r, 200, res, err)
}

// complete asks the kernel for completions at cursor_pos (default: the end of code).
func (a *API) complete(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Code      string `json:"code"`
		CursorPos *int   `json:"cursor_pos"`
	}
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	cur := len([]rune(req.Code))
	if req.CursorPos != nil {
		cur = *req.CursorPos
	}
	ls, err := a.svc.Session(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := ls.Complete(r.Context(), req.Code, cur)
	a.reply(w, r, 200, res, err)
}

func (a *API) execute(w http.ResponseWriter, r *http.Request) {
	var req session.EphemeralRequest
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if key := r.Header.Get(IdempotencyKeyHeader); key != "" {
		// Exactly once under retries: the key belongs to the caller's tenant.
		res, replayed, err := a.svc.RunEphemeralKeyed(r.Context(), key, req)
		markReplayed(w, replayed)
		a.reply(w, r, 200, res, err)
		return
	}
	res, err := a.svc.RunEphemeral(r.Context(), req)
	a.reply(w, r, 200, res, err)
}

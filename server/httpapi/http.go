package httpapi

import (
	"github.com/carryover/carryover"

	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const timeFormat = time.RFC3339Nano

// API is the HTTP + websocket surface of shared/API.md over a Service.
type API struct {
	svc     *Service
	maxBody int64
	origins map[string]bool
	log     *slog.Logger
	ui      http.Handler
	tenants map[string]string // token -> tenant
}

// NewAPI builds the handler. ui, when non-nil, serves the browser UI at /.
func NewAPI(svc *Service, token string, ui http.Handler) *API {
	a := &API{svc: svc, maxBody: svc.cfg.Server.MaxBodyBytes, log: svc.log, ui: ui, origins: map[string]bool{},
		tenants: map[string]string{token: carryover.DefaultTenant}}
	for name, tok := range svc.cfg.Auth.Tenants {
		a.tenants[tok] = name
	}
	for _, o := range svc.cfg.Server.AllowedOrigins {
		a.origins[strings.TrimRight(o, "/")] = true
	}
	return a
}

// Handler returns the routed, authenticated, panic-safe handler.
func (a *API) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	m.Handle("GET /metrics", promhttp.Handler())

	m.HandleFunc("POST /api/sessions", a.createSession)
	m.HandleFunc("GET /api/sessions", a.listSessions)
	m.HandleFunc("POST /api/sessions/reattach", a.reattach)
	m.HandleFunc("GET /api/sessions/{id}", a.getSession)
	m.HandleFunc("PATCH /api/sessions/{id}", a.patchSession)
	m.HandleFunc("DELETE /api/sessions/{id}", a.deleteSession)
	m.HandleFunc("POST /api/sessions/{id}/{action}", a.sessionAction)
	m.HandleFunc("PATCH /api/sessions/{id}/context", a.patchContext)
	m.HandleFunc("GET /api/sessions/{id}/events", a.listEvents)
	m.HandleFunc("GET /api/sessions/{id}/executions", a.listExecutions)
	m.HandleFunc("GET /api/sessions/{id}/tools", a.listTools)
	m.HandleFunc("GET /api/sessions/{id}/checkpoints", a.listCheckpoints)
	m.HandleFunc("POST /api/sessions/{id}/checkpoints/{cid}/restore", a.restoreCheckpoint)
	m.HandleFunc("GET /api/sessions/{id}/files", a.listFiles)
	m.HandleFunc("GET /api/sessions/{id}/files/{path...}", a.getFile)
	m.HandleFunc("PUT /api/sessions/{id}/files/{path...}", a.putFile)
	m.HandleFunc("DELETE /api/sessions/{id}/files/{path...}", a.deleteFile)
	m.HandleFunc("GET /api/sessions/{id}/ws", a.websocket)
	m.HandleFunc("POST /api/execute", a.execute)
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, carryover.Errorf(carryover.CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	if a.ui != nil {
		m.Handle("/", a.ui)
	}
	return a.recoverer(a.auth(rejectDotDot(m)))
}

// rejectDotDot answers 400 for API paths with ".." segments (raw or percent-encoded) before the
// mux would clean them into some other resource: a traversal attempt gets a clear error.
func rejectDotDot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			for _, seg := range strings.Split(r.URL.Path, "/") {
				if seg == ".." || seg == "." {
					writeError(w, carryover.Errorf(carryover.CodeInvalid, "path may not contain %q segments", seg).WithDetails("path", r.URL.Path))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a 500 in the API's error shape: no Go trace reaches a client.
func (a *API) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("panic in handler", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeError(w, carryover.Errorf(carryover.CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// tokenOf extracts the token: "Bearer t", "token t", or ?token=t.
func tokenOf(r *http.Request) string {
	h := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "bearer ", "token ", "Token "} {
		if strings.HasPrefix(h, p) {
			return strings.TrimSpace(h[len(p):])
		}
	}
	return r.URL.Query().Get("token")
}

// tenantOf finds the tenant of a token, comparing every known token in constant time.
func (a *API) tenantOf(t string) (string, bool) {
	found := ""
	for tok, tenant := range a.tenants {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			found = tenant
		}
	}
	return found, t != "" && found != ""
}

// auth guards /api/ with the tokens and scopes the request to the token's tenant: a session of
// another tenant answers 404, exactly like one that does not exist.
func (a *API) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			tenant, ok := a.tenantOf(tokenOf(r))
			if !ok {
				writeError(w, carryover.Errorf(carryover.CodeUnauthorized, "missing or wrong token"))
				return
			}
			if id := sessionIDOf(r.URL.Path); id != "" && !a.svc.visible(id, tenant) {
				writeError(w, carryover.Errorf(carryover.CodeNotFound, "session %q not found", id).WithDetails("session_id", id))
				return
			}
			r = r.WithContext(withTenant(r.Context(), tenant))
		}
		next.ServeHTTP(w, r)
	})
}

// sessionIDOf returns the {id} of /api/sessions/{id}[/...] ("" for other paths and "reattach").
func sessionIDOf(p string) string {
	rest, ok := strings.CutPrefix(p, "/api/sessions/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	if id == "reattach" {
		return ""
	}
	return id
}

// decode reads a JSON body into v: 413 over the size limit, 400 for malformed JSON or wrong types.
// An empty body is allowed when optional.
func (a *API) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body := http.MaxBytesReader(w, r.Body, a.maxBody)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return carryover.Errorf(carryover.CodePayloadTooLarge, "request body is larger than %d bytes", a.maxBody).WithDetails("limit", a.maxBody)
		}
		return carryover.Errorf(carryover.CodeInvalid, "reading body: %v", err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		if optional {
			return nil
		}
		return carryover.Errorf(carryover.CodeInvalid, "a JSON body is required")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return carryover.Errorf(carryover.CodeInvalid, "field %q must be %s, not %s", te.Field, te.Type.String(), te.Value).WithDetails("field", te.Field)
		}
		return carryover.Errorf(carryover.CodeInvalid, "malformed JSON: %v", err)
	}
	return nil
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := carryover.ErrorOf(err)
	if e.Code == carryover.CodeInternal {
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, e)
}

func sessionBody(s carryover.Session) map[string]any { return map[string]any{"session": s.View()} }

func (a *API) createSession(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if err := a.decode(w, r, &req, true); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.svc.Create(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, sessionBody(s))
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	tenant := tenantFrom(r.Context())
	all := []carryover.Session{}
	for _, s := range a.svc.List() {
		if s.TenantName() == tenant {
			all = append(all, s.View())
		}
	}
	writeJSON(w, 200, map[string]any{"sessions": all})
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	s, err := a.svc.Get(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, sessionBody(s))
}

func (a *API) patchSession(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Data map[string]any `json:"data"`
	}
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.svc.Patch(r.Context(), r.PathValue("id"), req.Data)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, sessionBody(s))
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
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, sessionBody(s))
}

// sessionAction routes POST /api/sessions/{id}/{action}.
func (a *API) sessionAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx := r.Context()
	var (
		s   carryover.Session
		err error
	)
	switch action {
	case "run":
		var req RunRequest
		if err := a.decode(w, r, &req, false); err != nil {
			a.fail(w, r, err)
			return
		}
		res, err := a.svc.Run(ctx, id, req, runHooks{})
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, 200, res)
		return
	case "exec":
		var req ExecRequest
		if err := a.decode(w, r, &req, false); err != nil {
			a.fail(w, r, err)
			return
		}
		res, err := a.svc.Exec(ctx, id, req)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, 200, res)
		return
	case "files":
		a.postFile(w, r)
		return
	case "tools":
		var t carryover.Tool
		if err := a.decode(w, r, &t, false); err != nil {
			a.fail(w, r, err)
			return
		}
		t, err := a.svc.RegisterTool(ctx, id, t)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"tool": t})
		return
	case "checkpoint":
		res, err := a.svc.CheckpointNow(ctx, id)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, 201, map[string]any{"checkpoint": res})
		return
	case "complete":
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
		res, err := a.svc.Complete(ctx, id, req.Code, cur)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, 200, res)
		return
	case "interrupt":
		if err := a.svc.Interrupt(ctx, id); err != nil {
			a.fail(w, r, err)
			return
		}
		s, err = a.svc.Get(id)
	case "start":
		s, err = a.svc.Start(ctx, id)
	case "pause":
		s, err = a.svc.Pause(ctx, id)
	case "resume":
		s, err = a.svc.Resume(ctx, id)
	case "stop", "cancel":
		var req struct {
			Reason string `json:"reason"`
		}
		if err := a.decode(w, r, &req, true); err != nil {
			a.fail(w, r, err)
			return
		}
		if action == "stop" {
			s, err = a.svc.Stop(ctx, id, req.Reason)
		} else {
			s, err = a.svc.Cancel(ctx, id, req.Reason)
		}
	case "heartbeat":
		s, err = a.svc.Heartbeat(ctx, id)
	case "restart":
		s, err = a.svc.Restart(ctx, id)
	case "rotate":
		s, err = a.svc.Rotate(ctx, id)
	case "hibernate":
		s, err = a.svc.Hibernate(ctx, id)
	default:
		err = carryover.Errorf(carryover.CodeNotFound, "no such action %q", action)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, sessionBody(s))
}

func (a *API) patchContext(w http.ResponseWriter, r *http.Request) {
	var req ContextRequest
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.svc.PatchContext(r.Context(), r.PathValue("id"), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, sessionBody(s))
}

// intParam parses a non-negative integer query parameter.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, carryover.Errorf(carryover.CodeInvalid, "%s must be a non-negative integer", name).WithDetails("field", name)
	}
	if max > 0 && n > max {
		n = max
	}
	return n, nil
}

func (a *API) listEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.svc.get(id); err != nil {
		a.fail(w, r, err)
		return
	}
	after, err := intParam(r, "after_sequence", 0, 0)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := intParam(r, "limit", 50, 1000)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	evs, err := a.svc.store.ListEvents(r.Context(), id, int64(after), limit, r.URL.Query().Get("event_type"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if evs == nil {
		evs = []carryover.Event{}
	}
	writeJSON(w, 200, map[string]any{"events": evs})
}

func (a *API) listExecutions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.svc.get(id); err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := intParam(r, "limit", 200, 1000)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ex, err := a.svc.store.ListExecutions(r.Context(), id, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if ex == nil {
		ex = []carryover.Execution{}
	}
	writeJSON(w, 200, map[string]any{"executions": ex})
}

func (a *API) listTools(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := a.svc.get(id); err != nil {
		a.fail(w, r, err)
		return
	}
	ts, err := a.svc.store.ListTools(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if ts == nil {
		ts = []carryover.Tool{}
	}
	writeJSON(w, 200, map[string]any{"tools": ts})
}

func (a *API) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	cps, err := a.svc.Checkpoints(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"checkpoints": cps})
}

func (a *API) restoreCheckpoint(w http.ResponseWriter, r *http.Request) {
	res, err := a.svc.RestoreCheckpoint(r.Context(), r.PathValue("id"), r.PathValue("cid"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s, _ := a.svc.Get(r.PathValue("id"))
	writeJSON(w, 200, map[string]any{"session": s.View(), "restore": res})
}

func (a *API) execute(w http.ResponseWriter, r *http.Request) {
	var req ExecuteRequest
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.svc.Execute(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, res)
}

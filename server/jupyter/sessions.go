package jupyter

// sessions.go: Jupyter's sessions (a notebook path bound to a kernel), kept in the kernel's carryover
// session document (data.jupyter_session), so they are in the database and survive restarts.

import (
	"net/http"

	"github.com/carryover/carryover"
)

// sessionKey holds a kernel's Jupyter session in its carryover session's data.
const sessionKey = "jupyter_session"

// sessionRequest is the body of POST and PATCH api/sessions.
type sessionRequest struct {
	Path     *string `json:"path"`
	Name     *string `json:"name"`
	Type     *string `json:"type"`
	Notebook *struct {
		Path string `json:"path"`
		Name string `json:"name"`
	} `json:"notebook"` // the 1.x-era form of path
	Kernel *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"kernel"`
}

// jsession is a Jupyter session as stored.
type jsession struct {
	ID   string `json:"id"`
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (s jsession) toMap() map[string]any {
	return map[string]any{"id": s.ID, "path": s.Path, "name": s.Name, "type": s.Type}
}

func sessionOf(doc carryover.Session) (jsession, bool) {
	m, ok := doc.Data[sessionKey].(map[string]any)
	if !ok {
		return jsession{}, false
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	s := jsession{ID: str("id"), Path: str("path"), Name: str("name"), Type: str("type")}
	return s, s.ID != ""
}

func (d *Door) sessionModel(doc carryover.Session, s jsession) map[string]any {
	return map[string]any{"id": s.ID, "path": s.Path, "name": s.Name, "type": s.Type,
		"kernel": d.kernelModel(doc), "notebook": map[string]any{"path": s.Path, "name": s.Name}}
}

// findSession returns the tenant's open kernel that holds Jupyter session sid.
func (d *Door) findSession(r *http.Request, match func(jsession) bool) (carryover.Session, jsession, bool) {
	for _, doc := range d.jupyterKernels(ctxTenant(r.Context())) {
		if s, ok := sessionOf(doc); ok && match(s) {
			return doc, s, true
		}
	}
	return carryover.Session{}, jsession{}, false
}

func (d *Door) listSessions(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, doc := range d.jupyterKernels(ctxTenant(r.Context())) {
		if s, ok := sessionOf(doc); ok {
			out = append(out, d.sessionModel(doc, s))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Door) getSession(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	doc, s, ok := d.findSession(r, func(s jsession) bool { return s.ID == sid })
	if !ok {
		d.writeError(w, carryover.Errorf(carryover.CodeNotFound, "session %q not found", sid))
		return
	}
	writeJSON(w, http.StatusOK, d.sessionModel(doc, s))
}

// createSession binds a path to a kernel: an existing one (kernel.id), the one the path already
// has, or a new one.
func (d *Door) createSession(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if err := readJSON(r, &req); err != nil {
		d.writeError(w, err)
		return
	}
	s := jsession{ID: newUUID(), Type: "notebook"}
	apply(&s, req)
	if s.Path == "" {
		d.writeError(w, carryover.Errorf(carryover.CodeInvalid, "path is required"))
		return
	}
	if doc, old, ok := d.findSession(r, func(x jsession) bool { return x.Path == s.Path }); ok && (req.Kernel == nil || req.Kernel.ID == "" || req.Kernel.ID == doc.ID) {
		writeJSON(w, http.StatusCreated, d.sessionModel(doc, old))
		return
	}
	doc, err := d.kernelFor(r, req, s.Path)
	if err != nil {
		d.writeError(w, err)
		return
	}
	if doc, err = d.svc.Patch(r.Context(), doc.ID, map[string]any{sessionKey: s.toMap()}); err != nil {
		d.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, d.sessionModel(doc, s))
}

// kernelFor returns the kernel a session request names (kernel.id) or a new one.
func (d *Door) kernelFor(r *http.Request, req sessionRequest, path string) (carryover.Session, error) {
	if req.Kernel != nil && req.Kernel.ID != "" {
		doc, err := d.lookup(r, req.Kernel.ID)
		if err != nil {
			return carryover.Session{}, err
		}
		if _, ok := doc.Data[kernelKey]; !ok {
			if doc, err = d.svc.Patch(r.Context(), doc.ID, map[string]any{kernelKey: specName}); err != nil {
				return carryover.Session{}, err
			}
		}
		return doc, nil
	}
	name := ""
	if req.Kernel != nil {
		name = req.Kernel.Name
	}
	return d.newKernel(r, name, path)
}

func apply(s *jsession, req sessionRequest) {
	if req.Notebook != nil {
		s.Path, s.Name = req.Notebook.Path, req.Notebook.Name
	}
	if req.Path != nil {
		s.Path = *req.Path
	}
	if req.Name != nil {
		s.Name = *req.Name
	}
	if req.Type != nil {
		s.Type = *req.Type
	}
}

// patchSession renames or moves a session, or binds it to another kernel (kernel.id, or a new one
// for kernel.name; the old kernel is shut down as Jupyter Server does).
func (d *Door) patchSession(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	doc, s, ok := d.findSession(r, func(s jsession) bool { return s.ID == sid })
	if !ok {
		d.writeError(w, carryover.Errorf(carryover.CodeNotFound, "session %q not found", sid))
		return
	}
	var req sessionRequest
	if err := readJSON(r, &req); err != nil {
		d.writeError(w, err)
		return
	}
	apply(&s, req)
	target := doc
	if req.Kernel != nil && (req.Kernel.ID == "" || req.Kernel.ID != doc.ID) {
		var err error
		if target, err = d.kernelFor(r, req, s.Path); err != nil {
			d.writeError(w, err)
			return
		}
	}
	target, err := d.svc.Patch(r.Context(), target.ID, map[string]any{sessionKey: s.toMap()})
	if err != nil {
		d.writeError(w, err)
		return
	}
	if target.ID != doc.ID {
		if err := d.shutdownKernel(r, doc.ID); err != nil {
			d.log.Warn("old kernel of a patched session not shut down", "kernel", doc.ID, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, d.sessionModel(target, s))
}

// deleteSession shuts the session's kernel down (final checkpoint, session closed, state kept).
func (d *Door) deleteSession(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("id")
	doc, _, ok := d.findSession(r, func(s jsession) bool { return s.ID == sid })
	if !ok {
		d.writeError(w, carryover.Errorf(carryover.CodeNotFound, "session %q not found", sid))
		return
	}
	if err := d.shutdownKernel(r, doc.ID); err != nil {
		d.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

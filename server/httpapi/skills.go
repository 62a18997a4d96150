package httpapi

import (
	"errors"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/carryover/carryover"
)

// skillRoutes manage the tenant's skills (server/session/skills.go): files every session of the
// tenant sees at /skills.
func (a *API) skillRoutes() []route {
	return []route{
		{"GET /api/skills", http.HandlerFunc(a.listSkills)},
		{"GET /api/skills/{path...}", http.HandlerFunc(a.getSkill)},
		{"PUT /api/skills/{path...}", http.HandlerFunc(a.putSkill)},
		{"DELETE /api/skills/{path...}", http.HandlerFunc(a.deleteSkill)},
	}
}

func (a *API) listSkills(w http.ResponseWriter, r *http.Request) {
	files, err := a.svc.Skills().List(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"skills": files})
}

func (a *API) getSkill(w http.ResponseWriter, r *http.Request) {
	info, b, err := a.svc.Skills().Read(r.Context(), r.PathValue("path"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	name := path.Base(info.Path)
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "attachment; filename="+strconv.Quote(name))
	_, _ = w.Write(b)
}

// putSkill writes the raw body to the skill path (parents created) -> 201.
func (a *API) putSkill(w http.ResponseWriter, r *http.Request) {
	body := http.MaxBytesReader(w, r.Body, a.maxBody)
	fi, err := a.svc.Skills().Write(r.Context(), r.PathValue("path"), body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = carryover.Errorf(carryover.CodePayloadTooLarge, "file is larger than %d bytes", a.maxBody).WithDetails("limit", a.maxBody)
		}
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"skill": fi})
}

func (a *API) deleteSkill(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.Skills().Delete(r.Context(), r.PathValue("path")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

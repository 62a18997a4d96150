package httpapi

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/carryover/carryover"
)

func (a *API) listFiles(w http.ResponseWriter, r *http.Request) {
	dir, err := a.svc.Files(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	files, err := dir.List()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, 200, map[string]any{"files": files})
}

func (a *API) getFile(w http.ResponseWriter, r *http.Request) {
	dir, err := a.svc.Files(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f, info, err := dir.Read(r.PathValue("path"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer f.Close()
	ct := mime.TypeByExtension(path.Ext(info.Name()))
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "attachment; filename="+strconv.Quote(info.Name()))
	_, _ = io.Copy(w, f)
}

// putFile writes the raw body to the path (parents created) → 201.
func (a *API) putFile(w http.ResponseWriter, r *http.Request) {
	dir, err := a.svc.Files(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body := http.MaxBytesReader(w, r.Body, a.maxBody)
	fi, err := dir.Write(r.PathValue("path"), body, r.ContentLength) // -1 when unknown (chunked)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = carryover.Errorf(carryover.CodePayloadTooLarge, "file is larger than %d bytes", a.maxBody).WithDetails("limit", a.maxBody)
		}
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"file": fi})
}

// postFile is StateSet's writeAgentSessionFile: {"path", "content", "encoding": "utf-8"|"base64"}.
func (a *API) postFile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Path     string `json:"path"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	}
	if err := a.decode(w, r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	var data []byte
	switch req.Encoding {
	case "", "utf-8", "utf8":
		data = []byte(req.Content)
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(req.Content); err != nil {
			a.fail(w, r, carryover.Errorf(carryover.CodeInvalid, "content is not valid base64: %v", err).WithDetails("field", "content"))
			return
		}
	default:
		a.fail(w, r, carryover.Errorf(carryover.CodeInvalid, "encoding must be utf-8 or base64").WithDetails("field", "encoding"))
		return
	}
	dir, err := a.svc.Files(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	fi, err := dir.Write(req.Path, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"file": fi})
}

func (a *API) deleteFile(w http.ResponseWriter, r *http.Request) {
	dir, err := a.svc.Files(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := dir.Delete(r.PathValue("path")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

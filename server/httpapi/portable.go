package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
	"github.com/carryover/carryover/server/session"
)

// DefaultMaxImportBytes is the archive size limit of POST /api/sessions/import when Options names
// none (server.max_import_bytes).
const DefaultMaxImportBytes = 16 << 30

// portableRoutes are a session's export to one archive and the import of one (docs/export-format.md).
func (a *API) portableRoutes() []route {
	return []route{
		{"GET /api/sessions/{id}/export", http.HandlerFunc(a.exportSession)},
		{"POST /api/sessions/import", http.HandlerFunc(a.importSession)},
	}
}

// exportEvents is session id's event log, oldest first, as an archive's events member. A log over
// the archive's part limit is refused (payload_too_large): export without events then.
func (a *API) exportEvents(r *http.Request, id string) ([]byte, error) {
	evs, err := a.svc.Events(r.Context(), id, carryover.EventQuery{})
	if err != nil {
		return nil, fmt.Errorf("export: events: %w", err)
	}
	return archive.EncodeEvents(evs, 0)
}

// exportSession streams the session's archive (?checkpoint_id= one of its checkpoints; default its
// current state; ?events=true with the session's event log). Errors before the first byte answer in the API's shape; one mid-stream cuts the
// stream short, which a reader sees as a truncated archive (it has no trailer).
func (a *API) exportSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	withEvents, err := boolParam(r, "events")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	e, err := a.svc.ExportSource(r.Context(), id, r.URL.Query().Get("checkpoint_id"))
	if err == nil && withEvents {
		e.Events, err = a.exportEvents(r, id)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.carryover.tar"`, id))
	w.Header().Set("X-Carryover-Checkpoint", e.Checkpoint.ID)
	w.WriteHeader(http.StatusOK)
	if _, err := archive.Write(r.Context(), w, e); err != nil {
		a.log.Warn("export cut short", "session", id, "checkpoint", e.Checkpoint.ID, "err", err)
		panic(http.ErrAbortHandler) // the client must not take a cut stream for a whole archive
	}
}

// importSession reads an archive from the body (?session_id= the new session's id) and answers 201
// with the new session and what the import wrote.
func (a *API) importSession(w http.ResponseWriter, r *http.Request) {
	limit := a.maxImport
	if limit <= 0 {
		limit = DefaultMaxImportBytes
	}
	if r.ContentLength > limit {
		a.fail(w, r, carryover.Errorf(carryover.CodePayloadTooLarge, "archive refused: the archive is over this server's limit of %d bytes", limit).
			WithDetails("reason", archive.ReasonTooLarge, "limit", limit))
		return
	}
	res, err := a.svc.Import(r.Context(), r.Body, session.ImportRequest{SessionID: r.URL.Query().Get("session_id"), MaxBytes: limit})
	a.reply(w, r, http.StatusCreated, res, err)
}

// boolParam is query parameter key as a boolean: false when absent, invalid_request when it is not
// true or false.
func boolParam(r *http.Request, key string) (bool, error) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, carryover.Errorf(carryover.CodeInvalid, "%s must be true or false, not %q", key, s).WithDetails("field", key)
	}
	return b, nil
}

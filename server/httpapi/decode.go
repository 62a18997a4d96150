package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/carryover/carryover"
)

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

// fail answers err in the API's error shape; internal errors are logged with their cause.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := carryover.ErrorOf(err)
	if e.Code == carryover.CodeInternal {
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, e)
}

// reply answers v with status, or err.
func (a *API) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

// intParam parses a non-negative integer query parameter. With a max (a page's size), 0 and
// anything above it are taken as max: a store reads 0 as "no limit", and an answer must stay a page.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, carryover.Errorf(carryover.CodeInvalid, "%s must be a non-negative integer", name).WithDetails("field", name)
	}
	if max > 0 && (n > max || n == 0) {
		n = max
	}
	return n, nil
}

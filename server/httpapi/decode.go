package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
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
	return unmarshal(data, v)
}

// unmarshal decodes JSON data into v; its error is the API's 400 (carryover.UnmarshalRequest).
func unmarshal(data []byte, v any) error { return carryover.UnmarshalRequest(data, v) }

// decodeChange decodes the body of a request that changes part of a session (PATCH), refusing a
// field the request does not take: such a field changes nothing, and a 200 for it told a client
// that a typo or a field it hoped to change (a session's name) had been saved. wants names the
// fields it takes, for the message; at least one of them must be given.
func (a *API) decodeChange(w http.ResponseWriter, r *http.Request, v any, wants ...string) error {
	var body json.RawMessage
	if err := a.decode(w, r, &body, false); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return carryover.Errorf(carryover.CodeInvalid, "the body must be a JSON object: this request takes %s", strings.Join(wants, ", "))
	}
	keys := slices.Sorted(maps.Keys(fields))
	for _, k := range keys {
		if !slices.Contains(wants, k) {
			return carryover.Errorf(carryover.CodeInvalid, "field %q cannot be changed here; this request takes %s", k, strings.Join(wants, ", ")).WithDetails("field", k)
		}
	}
	if len(keys) == 0 {
		return carryover.Errorf(carryover.CodeInvalid, "nothing to change: this request takes %s", strings.Join(wants, ", "))
	}
	return unmarshal(body, v)
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

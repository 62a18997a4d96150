package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
)

// TestPatchRefusesWhatItCannotChange: a PATCH of a session or of its context names a field it
// cannot change (a session's name, a misspelt key), gives none, or is not an object: a 400 naming
// the field, and the session is unchanged. Each was a 200 that changed nothing.
func TestPatchRefusesWhatItCannotChange(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ts.newSession(client.CreateRequest{SessionID: "p", Name: "before", Data: map[string]any{"k": "v"}})
	for _, c := range []struct{ path, body, field string }{
		{"/api/sessions/p", `{"name": "after"}`, "name"},
		{"/api/sessions/p", `{"data": {"k": "w"}, "name": "after"}`, "name"},
		{"/api/sessions/p", `{}`, ""},
		{"/api/sessions/p", `[{"data": {}}]`, ""},
		{"/api/sessions/p", `null`, ""},
		{"/api/sessions/p/context", `{"workingdir": "/workspace/x"}`, "workingdir"},
		{"/api/sessions/p/context", `{"env_vars": {"A": "1"}, "envvars": {"B": "2"}}`, "envvars"},
	} {
		r := ts.raw("PATCH", c.path, c.body)
		var e struct {
			Error apiError `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != 400 || e.Error.Code != "invalid_request" || (c.field != "" && e.Error.Details["field"] != c.field) ||
			!strings.Contains(e.Error.Message, "this request takes") {
			t.Errorf("PATCH %s %s: %d %s", c.path, c.body, r.Status, r.Body)
		}
	}
	s := ts.session("p")
	if s.Name != "before" || s.Data["k"] != "v" || s.AgentContext.WorkingDir != "/workspace" || len(s.AgentContext.EnvVars) != 0 {
		t.Errorf("after the refused PATCHes: name %q, data %v, context %s", s.Name, s.Data, dump(s.AgentContext))
	}
	if r := ts.raw("PATCH", "/api/sessions/p", `{"data": {"k": "w"}}`); r.Status != 200 || ts.session("p").Data["k"] != "w" {
		t.Errorf("PATCH data: %d %s", r.Status, r.Body)
	}
	if r := ts.raw("PATCH", "/api/sessions/p/context", `{"env_vars": {"A": "1"}}`); r.Status != 200 || ts.session("p").AgentContext.EnvVars["A"] != "1" {
		t.Errorf("PATCH context: %d %s", r.Status, r.Body)
	}
}

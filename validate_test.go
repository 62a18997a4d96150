package carryover

import (
	"encoding/json"
	"strings"
	"testing"
)

// wantInvalid fails unless err is CodeInvalid naming field.
func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	e := ErrorOf(err)
	if err == nil || e.Code != CodeInvalid || e.Details["field"] != field {
		t.Errorf("%s: %v (details %v), want invalid_request on %s", what, err, e.Details, field)
	}
}

func TestBudgetValidate(t *testing.T) {
	for _, b := range []Budget{{}, {CostCapCents: 1, IterationLimit: 2, DurationLimitSeconds: 3}} {
		if err := b.Validate(); err != nil {
			t.Errorf("%+v: %v", b, err)
		}
	}
	for _, b := range []Budget{{CostCapCents: -1}, {IterationLimit: -1}, {DurationLimitSeconds: -0.5}} {
		wantInvalid(t, "budget", b.Validate(), "budget")
	}
}

func TestValidateSessionIDAndLanguage(t *testing.T) {
	for _, id := range []string{"a", "sess_0123", "A.b-c_d", strings.Repeat("x", 128)} {
		if err := ValidateSessionID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", ".hidden", "-x", "a/b", "../x", "a b", strings.Repeat("x", 129)} {
		wantInvalid(t, "id "+id, ValidateSessionID(id), "session_id")
	}
	for _, l := range []string{"", "python", "python3"} {
		if err := ValidateLanguage(l); err != nil {
			t.Errorf("%q: %v", l, err)
		}
	}
	for _, l := range []string{"Python", "r", "javascript"} {
		wantInvalid(t, "language "+l, ValidateLanguage(l), "language")
	}
}

func TestValidateCodeAndEnv(t *testing.T) {
	if err := ValidateCode("print('é')\n"); err != nil {
		t.Error(err)
	}
	wantInvalid(t, "NUL code", ValidateCode("1\x00"), "code")
	if err := ValidateEnv(map[string]string{"A": "", "B_1": "x=y"}, "env"); err != nil {
		t.Error(err)
	}
	for _, env := range []map[string]string{{"": "1"}, {"A=B": "1"}, {"A\x00": "1"}, {"A": "x\x00"}} {
		wantInvalid(t, "env", ValidateEnv(env, "env_vars"), "env_vars")
	}
}

func TestToolValidate(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		field        string // "" when valid
	}{
		{"search", "", ""},
		{"search", "null", ""},
		{"a.b-c_1", `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":["integer","null"]}},"required":["q"]}`, ""},
		{"list", `{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"}}}}`, ""},
		{"1bad", "", "name"},
		{"", "", "name"},
		{"has space", "", "name"},
		{strings.Repeat("x", 129), "", "name"},
		{"t", `[]`, "input_schema"},
		{"t", `"string"`, "input_schema"},
		{"t", `{"type":"strnig"}`, "input_schema"},
		{"t", `{"type":["string",1]}`, "input_schema"},
		{"t", `{"type":7}`, "input_schema"},
		{"t", `{"properties":[]}`, "input_schema"},
		{"t", `{"properties":{"q":"string"}}`, "input_schema"},
		{"t", `{"properties":{"q":{"type":"text"}}}`, "input_schema"},
		{"t", `{"required":"q"}`, "input_schema"},
		{"t", `{"required":[1]}`, "input_schema"},
		{"t", `{"items":[{}]}`, "input_schema"},
		{"t", `{"items":{"type":"nope"}}`, "input_schema"},
	} {
		err := Tool{Name: tc.name, InputSchema: json.RawMessage(tc.schema)}.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%q %s: %v", tc.name, tc.schema, err)
			}
			continue
		}
		wantInvalid(t, tc.name+" "+tc.schema, err, tc.field)
	}
}

func TestWorkspacePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""}, {"/workspace", ""}, {"/workspace/", ""}, {"a/b", "a/b"}, {"/workspace/a//b/", "a/b"}, {"./a", "./a"},
	} {
		if got, err := WorkspacePath(tc.in); err != nil || got != tc.want {
			t.Errorf("WorkspacePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"/etc", "/workspacex", "..", "a/../b", "/workspace/../x", "a\\b", "a\x00"} {
		if _, err := WorkspacePath(bad); ErrorCode(err) != CodeInvalid {
			t.Errorf("WorkspacePath(%q) = %v, want invalid_request", bad, err)
		}
	}
}

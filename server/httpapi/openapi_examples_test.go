package httpapi

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The examples of docs/api.md are written for people: `{...}` for any object, `"a|b|c"` for the
// values a field can take, `Session` or `<the /run answer>` for an object shown elsewhere. The test
// reads them as follows: `{...}` is {}, `[...]` is [], a string of alternatives is tried with each
// alternative, a JSON alternation (`[..] | ".."`) with each side, and the named objects are the
// examples API.md gives for them.

var (
	alternatives = regexp.MustCompile(`^[a-z0-9_-]+(\|[a-z0-9_.-]+)+$`)
	jsonAlt      = regexp.MustCompile(`(\[[^\[\]]*\]|"[^"]*")\s\|\s("[^"]*"|\[[^\[\]]*\])`)
	fences       = regexp.MustCompile("(?s)```json\n(.*?)```")
	allFences    = regexp.MustCompile("(?s)```.*?```")
	inlineJSON   = regexp.MustCompile("`(\\{[^`]*)`")
	errorRow     = regexp.MustCompile(`(?m)^\| ([a-z_]+) \| (\d{3}) \|`)
)

// variants expands the "a|b|c" strings of v: the first alternatives everywhere, then each other
// alternative in turn.
func variants(v any) []any {
	switch x := v.(type) {
	case string:
		if alternatives.MatchString(x) && !strings.HasSuffix(x, "|...") {
			var out []any
			for _, a := range strings.Split(x, "|") {
				if a != "..." {
					out = append(out, a)
				}
			}
			return out
		}
		if alternatives.MatchString(strings.TrimSuffix(x, "|...")) {
			return variants(strings.TrimSuffix(x, "|..."))
		}
	case map[string]any:
		base := map[string]any{}
		alts := map[string][]any{}
		for k, c := range x {
			vs := variants(c)
			base[k], alts[k] = vs[0], vs[1:]
		}
		out := []any{base}
		for k, vs := range alts {
			for _, a := range vs {
				m := map[string]any{}
				for bk, bv := range base {
					m[bk] = bv
				}
				m[k] = a
				out = append(out, m)
			}
		}
		return out
	case []any:
		base := make([]any, len(x))
		alts := make([][]any, len(x))
		for i, c := range x {
			vs := variants(c)
			base[i], alts[i] = vs[0], vs[1:]
		}
		out := []any{base}
		for i, vs := range alts {
			for _, a := range vs {
				l := append([]any(nil), base...)
				l[i] = a
				out = append(out, l)
			}
		}
		return out
	}
	return []any{v}
}

// examples turns one API.md example into the JSON texts it stands for.
func examples(text string, named map[string]string) []string {
	text = strings.NewReplacer("{...}", "{}", "[...]", "[]").Replace(text)
	for name, js := range named {
		text = strings.ReplaceAll(text, name, js)
	}
	if m := jsonAlt.FindStringSubmatchIndex(text); m != nil {
		return append(examples(text[:m[0]]+text[m[2]:m[3]]+text[m[1]:], nil), examples(text[:m[0]]+text[m[4]:m[5]]+text[m[1]:], nil)...)
	}
	return []string{text}
}

// check validates every variant of every JSON text against the schema at loc.
func check(t *testing.T, c *jsonschema.Compiler, what, loc string, texts []string) {
	t.Helper()
	sch, err := c.Compile(loc)
	if err != nil {
		t.Errorf("%s: schema %s: %v", what, loc, err)
		return
	}
	for _, text := range texts {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Errorf("%s: not JSON once read (%v): %s", what, err, text)
			continue
		}
		for _, vv := range variants(v) {
			if err := sch.Validate(vv); err != nil {
				b, _ := json.Marshal(vv)
				t.Errorf("%s: %s does not validate against %s:\n%v", what, b, loc, err)
			}
		}
	}
}

// inlineExample maps the API.md examples starting with prefix to the schema at loc; fix rewrites
// what the reading rules above cannot.
type inlineExample struct {
	prefix, loc string
	fix         func(string) string
}

func op(path, method string) string {
	return "openapi.json#/paths/" + strings.ReplaceAll(path, "/", "~1") + "/" + method
}

func reqSchema(path, method string) string {
	return op(path, method) + "/requestBody/content/application~1json/schema"
}

func respSchema(path, method string, status int) string {
	return op(path, method) + "/responses/" + strconv.Itoa(status) + "/content/application~1json/schema"
}

func component(name string) string { return "openapi.json#/components/schemas/" + name }

// TestOpenAPISharedExamples: the JSON examples of docs/api.md validate against the description.
func TestOpenAPISharedExamples(t *testing.T) {
	raw, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	c := schemaCompiler(t)

	// the fenced blocks, in order
	blocks := fences.FindAllStringSubmatch(md, -1)
	fenced := []struct{ what, loc string }{
		{"create request", reqSchema("/api/sessions", "post")},
		{"Session object", component("Session")},
		{"run request", reqSchema("/api/sessions/{id}/run", "post")},
		{"run answer", respSchema("/api/sessions/{id}/run", "post", 200)},
	}
	if len(blocks) != len(fenced) {
		t.Fatalf("API.md has %d ```json blocks, the test knows %d: map the new ones to their schemas", len(blocks), len(fenced))
	}
	for i, f := range fenced {
		check(t, c, f.what, f.loc, examples(blocks[i][1], nil))
	}
	session := examples(blocks[1][1], nil)[0]
	runAnswer := examples(blocks[3][1], nil)[0]
	var ra struct{ Outputs []json.RawMessage }
	if err := json.Unmarshal([]byte(runAnswer), &ra); err != nil || len(ra.Outputs) == 0 {
		t.Fatalf("run answer has no outputs (%v)", err)
	}

	// the error table agrees with the description
	codes := errorRow.FindAllStringSubmatch(md, -1)
	if len(codes) == 0 {
		t.Fatal("no error table found in API.md")
	}
	doc := openAPIDoc(t)
	status, _ := resolve(doc, "#/components/schemas/ErrorObject/properties/code/x-status")
	var allCodes []string
	for _, row := range codes {
		allCodes = append(allCodes, row[1])
		if got, _ := status.(map[string]any)[row[1]].(float64); strconv.Itoa(int(got)) != row[2] {
			t.Errorf("API.md maps %s to %s, openapi.json to %v", row[1], row[2], got)
		}
	}

	// the inline examples, each by the text it starts with
	event := `{"sequence_number": 1, "event_type": "session_started", "payload": {}, "created_at": "2026-01-02T03:04:05Z"}`
	errFix := func(s string) string {
		return strings.Replace(s, `"code": "..."`, `"code": "`+strings.Join(allCodes, "|")+`"`, 1)
	}
	inline := []inlineExample{
		{`{"error": {"code"`, component("Error"), errFix},
		{`{"session": Session}`, respSchema("/api/sessions/{id}", "get", 200), nil},
		{`{"sessions": [Session...]}`, respSchema("/api/sessions", "get", 200), func(s string) string { return strings.Replace(s, "Session...", "Session", 1) }},
		{`{"data": `, reqSchema("/api/sessions/{id}", "patch"), nil},
		{`{"reason": `, reqSchema("/api/sessions/{id}/stop", "post"), nil},
		{`{"client_id": `, reqSchema("/api/sessions/reattach", "post"), nil},
		{`{"working_dir": "...", "env_vars"`, reqSchema("/api/sessions/{id}/context", "patch"), nil},
		{`{"language": "python", "code"`, reqSchema("/api/execute", "post"), nil},
		{`{"command": `, reqSchema("/api/sessions/{id}/exec", "post"), nil},
		{`{"stdout": `, respSchema("/api/sessions/{id}/exec", "post", 200), nil},
		{`{"files": `, respSchema("/api/sessions/{id}/files", "get", 200), nil},
		{`{"path": `, reqSchema("/api/sessions/{id}/files", "post"), nil},
		{`{"events": `, respSchema("/api/sessions/{id}/events", "get", 200), nil},
		{`{"name": "run_tests"`, reqSchema("/api/sessions/{id}/tools", "post"), nil},
		{`{"tool": `, component("Tool"), func(string) string { return `{"name": "run_tests"}` }}, // the answer's {...} is the tool
		{`{"tools": `, respSchema("/api/sessions/{id}/tools", "get", 200), nil},
		{`{"checkpoints": `, respSchema("/api/sessions/{id}/checkpoints", "get", 200), nil},
		{`{"usage": `, respSchema("/api/sessions/{id}/usage", "get", 200), nil},
		{`{"type": "run"`, component("WSClientFrame"), nil},
		{`{"type": "input_reply"`, component("WSClientFrame"), nil},
		{`{"type": "interrupt"`, component("WSClientFrame"), nil},
		{`{"type": "subscribe_events"`, component("WSClientFrame"), nil},
		{`{"type": "status"`, component("WSServerFrame"), nil},
		{`{"type": "output"`, component("WSServerFrame"), nil},
		{`{"type": "input_request"`, component("WSServerFrame"), nil},
		{`{"type": "result"`, component("WSServerFrame"), nil},
		{`{"type": "event"`, component("WSServerFrame"), nil},
		{`{"type": "error"`, component("WSServerFrame"), errFix},
		{`{"type": "comm", "msg_type", "msg_id"`, component("WSCommFrame"), func(string) string {
			return `{"type": "comm", "msg_type": "comm_open", "msg_id": "k1", "parent_msg_id": "p1", "content": {"comm_id": "c1", "data": {}, "target_name": "jupyter.widget"}, "metadata": {}, "buffers": ["AAE="]}`
		}},
		{`{"type": "comm", "msg_type": "comm_msg"`, component("WSClientCommFrame"), func(s string) string {
			return strings.NewReplacer(`{...}`, `{"method": "update"}`, `[...]`, `["AAE="]`).Replace(s)
		}},
		{`{"type": "comm_idle"`, component("WSCommIdleFrame"), func(string) string { return `{"type": "comm_idle", "parent_msg_id": "m1"}` }},
		{`{"type": "comm_output"`, component("WSCommOutputFrame"), func(string) string {
			return `{"type": "comm_output", "comm_id": "c1", "parent_msg_id": "m1", "output": {"type": "stream", "name": "stdout", "text": "x"}}`
		}},
		{`{"type": "comm_reset"`, component("WSCommResetFrame"), func(string) string { return `{"type": "comm_reset", "message": "a new kernel"}` }},
		{`{"status": "ok"}`, respSchema("/healthz", "get", 200), nil},
		{`{"status": "ready"}`, respSchema("/readyz", "get", 200), nil},
		{`{"status": "not_ready"`, respSchema("/readyz", "get", 503), func(string) string {
			return `{"status": "not_ready", "reason": "draining"}`
		}},
	}
	named := map[string]string{": Session}": ": " + session + "}", "[Session]": "[" + session + "]",
		"<the /run answer>": runAnswer, "<event>": event}
	seen := make([]int, len(inline))
	prose := allFences.ReplaceAllString(md, "")
	for _, m := range inlineJSON.FindAllStringSubmatch(prose, -1) {
		text := m[1]
		i := slices.IndexFunc(inline, func(e inlineExample) bool { return strings.HasPrefix(text, e.prefix) })
		if i < 0 {
			t.Errorf("API.md example %s is not mapped to a schema in this test", text)
			continue
		}
		seen[i]++
		if inline[i].fix != nil {
			text = inline[i].fix(text)
		}
		if strings.Contains(text, "<an item of outputs above>") {
			for j, o := range ra.Outputs {
				check(t, c, fmt.Sprintf("%s (output %d)", inline[i].prefix, j), inline[i].loc,
					[]string{strings.Replace(text, "<an item of outputs above>", string(o), 1)})
			}
			continue
		}
		check(t, c, inline[i].prefix, inline[i].loc, examples(text, named))
	}
	for i, n := range seen {
		if n == 0 {
			t.Errorf("API.md no longer has an example starting %s", inline[i].prefix)
		}
	}
}

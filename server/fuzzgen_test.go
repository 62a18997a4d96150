package server_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// schemaGen generates JSON values from the JSON Schemas of openapi.json (OpenAPI 3.1 = JSON Schema
// 2020-12): values a schema accepts, and values that break it in one way. Everything it draws
// comes from r, so a seed replays the same values.
type schemaGen struct {
	doc map[string]any // the whole openapi.json, for $ref
	r   *rand.Rand
	// fields overrides the valid value of a property by name (code to run, commands, paths...):
	// the fuzz keeps kernel work and side effects to harmless, known inputs.
	fields map[string]func(r *rand.Rand) any
}

// deref follows $ref (local JSON pointers) until a schema without one.
func (g *schemaGen) deref(s map[string]any) map[string]any {
	for i := 0; i < 32; i++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		v, ok := jsonPointer(g.doc, ref)
		m, isObj := v.(map[string]any)
		if !ok || !isObj {
			return map[string]any{}
		}
		s = m
	}
	return s
}

// jsonPointer resolves "#/a/b" in doc.
func jsonPointer(doc any, ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := doc
	if p == "" {
		return cur, true
	}
	for _, tok := range strings.Split(p, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (g *schemaGen) pick(n int) int { return g.r.IntN(n) }

// types lists a schema's "type" (a string or a list).
func types(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// valid draws a value s accepts. field is the property name it is for ("" at the top).
func (g *schemaGen) valid(s map[string]any, field string, depth int) any {
	if f, ok := g.fields[field]; ok && field != "" {
		return f(g.r)
	}
	s = g.deref(s)
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[g.pick(len(e))]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			alt, _ := alts[g.pick(len(alts))].(map[string]any)
			return g.valid(alt, field, depth)
		}
	}
	ts := types(s)
	if len(ts) == 0 {
		if _, ok := s["properties"]; ok {
			ts = []string{"object"}
		} else {
			return g.anyJSON(depth)
		}
	}
	switch ts[g.pick(len(ts))] {
	case "null":
		return nil
	case "boolean":
		return g.r.IntN(2) == 0
	case "integer":
		lo := 0
		if m, ok := s["minimum"].(float64); ok {
			lo = int(m)
		}
		hi := lo + 100
		if m, ok := s["maximum"].(float64); ok && int(m) < hi {
			hi = int(m)
		}
		return lo + g.r.IntN(hi-lo+1)
	case "number":
		lo := 0.0
		if m, ok := s["minimum"].(float64); ok {
			lo = m
		}
		return lo + float64(g.r.IntN(1000))/10
	case "string":
		if p, ok := s["pattern"].(string); ok && strings.HasPrefix(p, "^[A-Za-z0-9]") {
			return fmt.Sprintf("fz%d", g.r.Uint32())
		}
		return g.str()
	case "array":
		items, _ := s["items"].(map[string]any)
		n := 1 + g.pick(3)
		out := make([]any, n)
		for i := range out {
			out[i] = g.valid(items, field, depth+1)
		}
		return out
	default: // object
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req := map[string]bool{}
		if rs, ok := s["required"].([]any); ok {
			for _, r := range rs {
				req[fmt.Sprint(r)] = true
			}
		}
		for _, k := range sortedKeys(props) {
			ps, _ := props[k].(map[string]any)
			if ro, _ := g.deref(ps)["readOnly"].(bool); ro {
				continue
			}
			if req[k] || g.r.IntN(2) == 0 {
				out[k] = g.valid(ps, k, depth+1)
			}
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if ap && depth < 4 {
				for i := g.pick(3); i > 0; i-- {
					out[fmt.Sprintf("k%d", g.pick(100))] = g.anyJSON(depth + 1)
				}
			}
		case map[string]any:
			for i := g.pick(3); i > 0; i-- {
				out[fmt.Sprintf("K%d", g.pick(100))] = g.valid(ap, "", depth+1)
			}
		}
		return out
	}
}

// str is a short string, sometimes with unicode, control characters or quotes.
func (g *schemaGen) str() string {
	pool := []string{"a", "fuzz", "héllo", "日本語", "🙂", "\u0000", "\n", "\"", "\\", "<script>", "%2F", "..", " ", "\u202e", "x=y"}
	var b strings.Builder
	for i := g.pick(4); i >= 0; i-- {
		b.WriteString(pool[g.pick(len(pool))])
	}
	return b.String()
}

// anyJSON is an arbitrary small JSON value.
func (g *schemaGen) anyJSON(depth int) any {
	n := 6
	if depth > 3 {
		n = 4
	}
	switch g.pick(n) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2:
		return float64(g.r.IntN(2000)) - 1000
	case 3:
		return g.str()
	case 4:
		return []any{g.anyJSON(depth + 1), g.anyJSON(depth + 1)}
	default:
		return map[string]any{"k": g.anyJSON(depth + 1)}
	}
}

// wrongType is a value of another JSON type than any s allows.
func (g *schemaGen) wrongType(s map[string]any) any {
	s = g.deref(s)
	allowed := map[string]bool{}
	for _, t := range types(s) {
		allowed[t] = true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok {
			for _, a := range alts {
				am, _ := a.(map[string]any)
				for _, t := range types(g.deref(am)) {
					allowed[t] = true
				}
			}
		}
	}
	if allowed["number"] {
		allowed["integer"] = true
	}
	cands := []struct {
		t string
		v any
	}{
		{"string", "not-" + g.str()}, {"integer", 42}, {"number", 1.5}, {"boolean", true},
		{"array", []any{1, "two"}}, {"object", map[string]any{"x": 1}}, {"null", nil},
	}
	var ok []any
	for _, c := range cands {
		if !allowed[c.t] && !(c.t == "integer" && allowed["number"]) {
			ok = append(ok, c.v)
		}
	}
	if len(ok) == 0 {
		return []any{}
	}
	return ok[g.pick(len(ok))]
}

// mutation is one way to break a body: a name for failure messages and the bytes to send.
type mutation struct {
	name string
	body []byte
}

// invalid breaks a valid body of schema s in one way, chosen by the generator: typed mutations
// (a required field dropped, a field of the wrong type, an unknown huge field, huge or negative
// numbers, unicode) and raw ones (empty, not JSON, truncated, invalid UTF-8, deep nesting, ...).
func (g *schemaGen) invalid(s map[string]any, maxBody int) mutation {
	s = g.deref(s)
	base, _ := g.valid(s, "", 0).(map[string]any)
	props, _ := s["properties"].(map[string]any)
	keys := sortedKeys(props)
	var required []string
	if rs, ok := s["required"].([]any); ok {
		for _, r := range rs {
			required = append(required, fmt.Sprint(r))
		}
	}
	enc := func(name string, v any) mutation {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return mutation{name, b}
	}
	cp := func() map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	field := func() string {
		if len(keys) == 0 {
			return "x"
		}
		return keys[g.pick(len(keys))]
	}
	// splice replaces field f's value by raw JSON text in the encoding of base.
	splice := func(name, f, rawVal string) mutation {
		m := cp()
		m[f] = "\x00SPLICE\x00"
		b, _ := json.Marshal(m)
		return mutation{name, []byte(strings.Replace(string(b), `"\u0000SPLICE\u0000"`, rawVal, 1))}
	}
	switch g.pick(17) {
	case 0:
		if len(required) > 0 {
			m := cp()
			f := required[g.pick(len(required))]
			delete(m, f)
			return enc("missing required "+f, m)
		}
		return enc("empty object", map[string]any{})
	case 1:
		f := field()
		m := cp()
		ps, _ := props[f].(map[string]any)
		m[f] = g.wrongType(ps)
		return enc("wrong type for "+f, m)
	case 2:
		m := cp()
		m["unknown_"+g.str()] = strings.Repeat("A", 64<<10)
		return enc("unknown huge field", m)
	case 3:
		f := field()
		m := cp()
		m[f] = strings.Repeat("Ω", 100<<10)
		return enc("huge string in "+f, m)
	case 4:
		return mutation{"empty body", nil}
	case 5:
		bodies := []string{"not json", "{", "[]", "null", "\"str\"", "42", "{\"a\":}", "{'a': 1}", "\ufeff{}", "{} {}", "true"}
		b := bodies[g.pick(len(bodies))]
		return mutation{"non-JSON or non-object body " + fmt.Sprintf("%q", b), []byte(b)}
	case 6:
		b, _ := json.Marshal(base)
		if len(b) > 1 {
			return mutation{"truncated JSON", b[:1+g.pick(len(b)-1)]}
		}
		return mutation{"truncated JSON", []byte("{")}
	case 7:
		return splice("invalid UTF-8 in a string", field(), "\"\xff\xfe\xc3(\"")
	case 8:
		depth := 100000
		return splice("deeply nested value", field(), strings.Repeat("[", depth)+strings.Repeat("]", depth))
	case 9:
		nums := []string{"1e308", "-1e308", "1e400", "-1", "0", "-0", "99999999999999999999999999", "9223372036854775808", "-9223372036854775809", "1.5", "123456789"}
		n := nums[g.pick(len(nums))]
		return splice("number "+n, field(), n)
	case 10:
		m := cp()
		f := field()
		m[f] = "\u202e\u0000🙂\ud7ff\ufffd" + g.str()
		return enc("unicode in "+f, m)
	case 11:
		return mutation{"body over the size limit", []byte(`{"x": "` + strings.Repeat("b", maxBody+10) + `"}`)}
	case 12:
		b, _ := json.Marshal(base)
		return mutation{"duplicate keys", []byte(strings.Replace(string(b), "{", `{"`+field()+`": 1, `, 1))}
	case 13:
		return splice("deeply nested objects", field(), strings.Repeat(`{"a":`, 5000)+"1"+strings.Repeat("}", 5000))
	case 14:
		return splice("NaN", field(), "NaN")
	case 15:
		arr := make([]any, 20000)
		for i := range arr {
			arr[i] = i
		}
		m := cp()
		m[field()] = arr
		return enc("long array", m)
	default:
		return enc("array for the object", []any{base})
	}
}

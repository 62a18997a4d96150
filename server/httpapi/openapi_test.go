package httpapi

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/carryover/carryover"
)

// apiDoc is the API's contract document, docs/api.md, from this package.
const apiDoc = "../../docs/api.md"

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	return doc
}

func obj(t *testing.T, v any, what string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, not an object", what, v)
	}
	return m
}

// TestOpenAPIRoutes: every registered route is described, and every description is a route.
func TestOpenAPIRoutes(t *testing.T) {
	registered := map[string]bool{}
	for _, rt := range New(nil, Options{}).routes() {
		method, path, ok := strings.Cut(rt.pattern, " ")
		if !ok || rt.handler == nil {
			t.Fatalf("route %q needs a method and a handler", rt.pattern)
		}
		path = strings.ReplaceAll(path, "...}", "}")
		key := strings.ToLower(method) + " " + path
		if registered[key] {
			t.Errorf("route %q is registered twice", rt.pattern)
		}
		registered[key] = true
	}
	described := map[string]bool{}
	for path, item := range obj(t, openAPIDoc(t)["paths"], "paths") {
		for m := range obj(t, item, path) {
			if slices.Contains(httpMethods, m) {
				described[m+" "+path] = true
			}
		}
	}
	for k := range registered {
		if !described[k] {
			t.Errorf("route %q has no description in openapi.json", k)
		}
	}
	for k := range described {
		if !registered[k] {
			t.Errorf("openapi.json describes %q, which no route serves", k)
		}
	}
	if len(registered) < 30 {
		t.Errorf("only %d routes found; routes() should list them all", len(registered))
	}
}

// walk calls fn on every value of v with its JSON pointer.
func walk(ptr string, v any, fn func(ptr string, v any)) {
	fn(ptr, v)
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			walk(ptr+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), c, fn)
		}
	case []any:
		for i, c := range x {
			walk(ptr+"/"+strconv.Itoa(i), c, fn)
		}
	}
}

// resolve follows a local JSON pointer ("#/a/b") in doc.
func resolve(doc any, ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(p, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := cur.(type) {
		case map[string]any:
			if cur, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// schemaCompiler has openapi.json as resource "openapi.json" (OpenAPI 3.1 schemas are JSON Schema 2020-12).
func schemaCompiler(t *testing.T) *jsonschema.Compiler {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPI))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOpenAPIDocument: the document is OpenAPI 3.1 shaped, every $ref resolves, every schema compiles.
func TestOpenAPIDocument(t *testing.T) {
	doc := openAPIDoc(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi is %q, want 3.1.x", v)
	}
	info := obj(t, doc["info"], "info")
	if info["title"] == "" || info["version"] == nil || info["version"] == "" {
		t.Errorf("info needs title and version: %v", info)
	}
	if s, _ := doc["servers"].([]any); len(s) == 0 || obj(t, s[0], "servers[0]")["url"] != "/" {
		t.Errorf("servers should be [{\"url\": \"/\"}], is %v", doc["servers"])
	}
	schemes := obj(t, obj(t, doc["components"], "components")["securitySchemes"], "securitySchemes")
	for _, sec := range doc["security"].([]any) {
		for name := range obj(t, sec, "security") {
			if schemes[name] == nil {
				t.Errorf("security names unknown scheme %q", name)
			}
		}
	}
	refs := 0
	walk("#", doc, func(ptr string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			refs++
			if _, ok := resolve(doc, ref); !ok {
				t.Errorf("%s: $ref %q does not resolve", ptr, ref)
			}
		}
	})
	if refs == 0 {
		t.Error("no $ref found at all")
	}
	opIDs := map[string]string{}
	pathParam := regexp.MustCompile(`\{([^}]+)\}`)
	for path, item := range obj(t, doc["paths"], "paths") {
		if !strings.HasPrefix(path, "/") {
			t.Errorf("path %q does not start with /", path)
		}
		it := obj(t, item, path)
		for m, op := range it {
			if !slices.Contains(httpMethods, m) {
				continue
			}
			o := obj(t, op, m+" "+path)
			id, _ := o["operationId"].(string)
			if id == "" || opIDs[id] != "" {
				t.Errorf("%s %s: operationId %q missing or already used by %s", m, path, id, opIDs[id])
			}
			opIDs[id] = m + " " + path
			if rs, _ := o["responses"].(map[string]any); len(rs) == 0 {
				t.Errorf("%s %s has no responses", m, path)
			}
			// every {param} of the path is declared as a path parameter
			declared := map[string]bool{}
			for _, list := range []any{it["parameters"], o["parameters"]} {
				ps, _ := list.([]any)
				for _, p := range ps {
					pm := obj(t, p, "parameter")
					if ref, ok := pm["$ref"].(string); ok {
						r, _ := resolve(doc, ref)
						pm = obj(t, r, ref)
					}
					if pm["in"] == "path" {
						declared[pm["name"].(string)] = true
					}
				}
			}
			for _, sub := range pathParam.FindAllStringSubmatch(path, -1) {
				if !declared[sub[1]] {
					t.Errorf("%s %s: path parameter %q is not declared", m, path, sub[1])
				}
			}
		}
	}
	c := schemaCompiler(t)
	for name := range obj(t, obj(t, doc["components"], "components")["schemas"], "schemas") {
		if _, err := c.Compile("openapi.json#/components/schemas/" + name); err != nil {
			t.Errorf("schema %s does not compile: %v", name, err)
		}
	}
}

// TestOpenAPIErrorCodes: the error code enum is exactly the domain's codes (error.go, and node.go's
// not_owner: every Code constant of the root package), each with statusOf's status.
func TestOpenAPIErrorCodes(t *testing.T) {
	files, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, codeConsts(f)...)
	}
	if !slices.Contains(codes, string(carryover.CodeNotOwner)) {
		t.Fatalf("not_owner not found among the root package's codes %v", codes)
	}
	checkCodeEnum(t, codes)
}

// codeConsts are the values of the constants of type Code declared in f.
func codeConsts(f *ast.File) []string {
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if ok && vs.Type != nil && len(vs.Values) == 1 {
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Code" {
				if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					codes = append(codes, s)
				}
			}
		}
		return true
	})
	return codes
}

// checkCodeEnum: the document's code enum is codes, each with statusOf's status in x-status and a
// row of the description's table.
func checkCodeEnum(t *testing.T, codes []string) {
	t.Helper()
	if len(codes) < 5 {
		t.Fatalf("found only %d codes in error.go", len(codes))
	}
	doc := openAPIDoc(t)
	code, _ := resolve(doc, "#/components/schemas/ErrorObject/properties/code")
	cm := obj(t, code, "ErrorObject.code")
	var enum []string
	for _, v := range cm["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	sort.Strings(codes)
	sort.Strings(enum)
	if !slices.Equal(codes, enum) {
		t.Errorf("code enum %v, error.go has %v", enum, codes)
	}
	status := obj(t, cm["x-status"], "x-status")
	for _, c := range codes {
		want := statusOf(carryover.Code(c))
		if got, _ := status[c].(float64); int(got) != want {
			t.Errorf("x-status[%s] = %v, statusOf says %d", c, status[c], want)
		}
		if !strings.Contains(cm["description"].(string), "| "+c+" | "+strconv.Itoa(want)+" |") {
			t.Errorf("the code description's table lacks the row of %s (%d)", c, want)
		}
	}
}

// TestOpenAPINotOwner: every session-scoped operation (/api/sessions/{id}...), the ones a cluster
// node routes to the session's owner, documents the 421 not_owner answer.
func TestOpenAPINotOwner(t *testing.T) {
	doc := openAPIDoc(t)
	n := 0
	for path, item := range obj(t, doc["paths"], "paths") {
		if !strings.HasPrefix(path, "/api/sessions/{id}") {
			continue
		}
		for m, op := range obj(t, item, path) {
			if !slices.Contains(httpMethods, m) {
				continue
			}
			n++
			rs := obj(t, obj(t, op, m+" "+path)["responses"], m+" "+path+" responses")
			if ref, _ := obj(t, rs["421"], m+" "+path+" 421")["$ref"].(string); ref != "#/components/responses/NotOwner" {
				t.Errorf("%s %s: 421 is %v, want the NotOwner response", m, path, rs["421"])
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d session-scoped operations found", n)
	}
	if statusOf(carryover.CodeNotOwner) != 421 {
		t.Fatalf("statusOf(not_owner) = %d", statusOf(carryover.CodeNotOwner))
	}
}

// TestOpenAPIServed: GET /api/openapi.json answers the embedded document, behind the token.
func TestOpenAPIServed(t *testing.T) {
	h := New(nil, Options{Tokens: map[string]string{"tok": carryover.DefaultTenant}}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/openapi.json", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", rec.Code)
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer tok")
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), openAPI) {
		t.Errorf("with a token: %d %q, %d bytes (want 200 application/json, the %d bytes of openapi.json)",
			rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len(), len(openAPI))
	}
}

// TestOpenAPIEventTypes: the events route's event_type enum is exactly the types the server accepts
// and logs (carryover.EventTypes), so a client generated from the description offers no name the
// server refuses and misses none it logs.
func TestOpenAPIEventTypes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	var get struct {
		Parameters []struct {
			Name   string `json:"name"`
			Schema struct {
				Enum []string `json:"enum"`
			} `json:"schema"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(doc.Paths["/api/sessions/{id}/events"]["get"], &get); err != nil {
		t.Fatal(err)
	}
	for _, p := range get.Parameters {
		if p.Name == "event_type" {
			if !slices.Equal(p.Schema.Enum, carryover.EventTypes) {
				t.Fatalf("event_type enum %v, want carryover.EventTypes %v", p.Schema.Enum, carryover.EventTypes)
			}
			return
		}
	}
	t.Fatal("the events route has no event_type parameter")
}

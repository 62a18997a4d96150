// Package speccheck checks the Go client's wire types (package client) against the API's
// description, server/httpapi/openapi.json, whose answers the server's own tests check
// (server/httpapi/openapi_*_test.go). So a field renamed, added or retyped on one side only fails
// here, in a second and without a server.
//
// It reads the client's source (go/ast; no type checker is needed: the wire structs use only
// basic types, time.Time, json.RawMessage, any and the package's own types) rather than using
// reflect, because package client's tests share one TestMain that builds and starts a server, and
// because the answer envelopes are unexported. It checks:
//
//   - every operation of the spec is wrapped by the endpoint table below (or listed as not wrapped,
//     with why), and the Go types of each wrapped operation's JSON request body (sent) and 2xx
//     answer (decoded) match its schemas, recursively: each JSON name of a Go field is a property
//     of the schema (no invented fields) with a compatible type (string, date-time, integer,
//     number, boolean, array, object, map, nullable), each property of the schema is a Go field
//     (nothing dropped, unless listed in notMirrored with why), a required property is never
//     omitempty, and a field sent as null is nullable in the spec;
//   - the websocket frames the same way (client frames sent, Frame decoded as the union of the
//     server frames), including that each client frame's frameType() is its schema's "type";
//   - every schema is mirrored by a Go type of the mirrors table or listed in notMirrored, every
//     struct of the package with JSON tags is reached from the endpoints and frames, and no
//     function declares an anonymous struct with JSON tags (name it so that it is checked);
//   - the package's string constants (State*, Code*, Status*, Frame*) are exactly the spec's enums.
package speccheck

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// mirrors maps each Go type of the client that mirrors a component schema to that schema.
var mirrors = map[string]string{
	"Session":             "Session",
	"Sandbox":             "Sandbox",
	"AgentContext":        "AgentContext",
	"Budget":              "Budget",
	"BudgetConsumed":      "BudgetConsumed",
	"Rotation":            "Rotation",
	"CheckpointRef":       "CheckpointRef",
	"CreateRequest":       "CreateRequest",
	"SandboxRequest":      "SandboxRequest",
	"ContextRequest":      "ContextRequest",
	"Output":              "Output",
	"RunRequest":          "RunRequest",
	"RunResult":           "RunResult",
	"RunError":            "RunError",
	"ExecuteRequest":      "ExecuteRequest",
	"Key":                 "APIKey",
	"CreatedKey":          "CreatedKey",
	"CreateKeyRequest":    "CreateKeyRequest",
	"CompleteReply":       "CompleteReply",
	"completeRequest":     "CompleteRequest",
	"ExecRequest":         "ExecRequest",
	"ExecResult":          "ExecResult",
	"CheckpointResult":    "CheckpointResult",
	"VarSkip":             "VarSkip",
	"FileSkip":            "FileSkip",
	"CheckpointInfo":      "CheckpointSummary",
	"RestoreResult":       "RestoreResult",
	"Recomputed":          "Recomputed",
	"RestoreReport":       "RestoreReport",
	"Event":               "Event",
	"Execution":           "Execution",
	"Tool":                "Tool",
	"ToolRequest":         "Tool",
	"FileInfo":            "FileInfo",
	"FileRequest":         "FileWriteRequest",
	"NotebookRun":         "NotebookRun",
	"ImportResult":        "ImportResult",
	"ErrorBody":           "ErrorObject",
	"errorAnswer":         "Error",
	"healthAnswer":        "Health",
	"NodeStatus":          "NodeStatus",
	"Usage":               "Usage",
	"sessionAnswer":       "SessionAnswer",
	"patchSessionRequest": "PatchSessionRequest",
	"reattachRequest":     "ReattachRequest",
	"reasonRequest":       "ReasonRequest",
	"Frame":               "WSServerFrame",
	"RunFrame":            "WSClientRunFrame",
	"InputReply":          "WSClientInputReplyFrame",
	"Interrupt":           "WSClientInterruptFrame",
	"SubscribeEvents":     "WSClientSubscribeEventsFrame",
	"Ping":                "WSClientPingFrame",
}

// inline lists the Go types that mirror a schema written inline (no component of its own); they
// are checked where they are met.
var inline = map[string]string{
	"CheckpointTimings": "CheckpointResult.timings",
	"RestoreTimings":    "RestoreResult.timings",
	"ArchiveSource":     "ImportResult.source",
	"GroupTiming":       "RestoreResult.groups[]",
	"EndedProcess":      "RunResult.processes_ended[]",
	"NotebookCellRun":   "NotebookRun.cells[]",
	"ForkRequest":       "POST /api/sessions/{id}/fork request",
	"forkAnswer":        "POST /api/sessions/{id}/fork answer",
	"sessionsAnswer":    "GET /api/sessions answer",
	"eventsAnswer":      "GET /api/sessions/{id}/events answer",
	"executionsAnswer":  "GET /api/sessions/{id}/executions answer",
	"toolsAnswer":       "GET /api/sessions/{id}/tools answer",
	"toolAnswer":        "POST /api/sessions/{id}/tools answer",
	"checkpointsAnswer": "GET /api/sessions/{id}/checkpoints answer",
	"checkpointAnswer":  "POST /api/sessions/{id}/checkpoint answer",
	"restoreAnswer":     "POST /api/sessions/{id}/checkpoints/{cid}/restore answer",
	"usageAnswer":       "GET /api/sessions/{id}/usage answer",
	"filesAnswer":       "GET /api/sessions/{id}/files answer",
	"fileAnswer":        "POST/PUT /api/sessions/{id}/files answer",
	"skillsAnswer":      "GET /api/skills answer",
	"skillAnswer":       "PUT /api/skills/{path} answer",
	"keysAnswer":        "GET /api/admin/keys answer",
	"ClusterNode":       "NodeStatus.cluster[]",
	"DiskStatus":        "NodeStatus.disk",
}

// notMirrored lists the schemas no Go type mirrors, with why.
var notMirrored = map[string]string{
	"WSClientFrame":       "the union of the client frames, each mirrored by its own type",
	"WSStatusFrame":       "a variant of WSServerFrame (Frame)",
	"WSOutputFrame":       "a variant of WSServerFrame (Frame)",
	"WSInputRequestFrame": "a variant of WSServerFrame (Frame)",
	"WSResultFrame":       "a variant of WSServerFrame (Frame)",
	"WSEventFrame":        "a variant of WSServerFrame (Frame)",
	"WSErrorFrame":        "a variant of WSServerFrame (Frame)",
	"WSRunningFrame":      "a variant of WSServerFrame (Frame)",
	"WSNoticeFrame":       "a variant of WSServerFrame (Frame)",
	"WSPongFrame":         "a variant of WSServerFrame (Frame)",
	"VariableInfo":        "GET .../variables (the UI's inspector) is not wrapped",
	"Variables":           "GET .../variables (the UI's inspector) is not wrapped",
	"CheckpointDetail":    "GET .../checkpoints/{cid} (the UI's checkpoint diff) is not wrapped",
	"RowsPage":            "GET .../variables/{name}/rows (the UI's data viewer) is not wrapped",
	"WSClientCommFrame":   "comm frames are the browser UI's widget relay (ws ?comms=true); the Go client does not ask for them",
	"WSCommFrame":         "comm frames are the browser UI's widget relay (ws ?comms=true); the Go client does not ask for them",
	"WSCommOutputFrame":   "comm frames are the browser UI's widget relay (ws ?comms=true); the Go client does not ask for them",
	"WSCommIdleFrame":     "comm frames are the browser UI's widget relay (ws ?comms=true); the Go client does not ask for them",
	"WSCommResetFrame":    "comm frames are the browser UI's widget relay (ws ?comms=true); the Go client does not ask for them",
	"Ready":               "GET /readyz (a load balancer's readiness probe) is not wrapped",
}

// notMirroredProps lists properties of mirrored schemas that the Go types leave out on purpose,
// with why ("GoType.property").
var notMirroredProps = map[string]string{}

// endpoint is one operation the client wraps: the Go type of its JSON request body ("" for none or
// a non-JSON body, rawJSON for JSON bytes the caller gives as they are) and of its 2xx JSON answer
// ("" for none or a non-JSON answer).
type endpoint struct {
	method, path string
	req, resp    string
}

const rawJSON = "(raw JSON)"

var endpoints = []endpoint{
	{"GET", "/healthz", "", "healthAnswer"},
	{"GET", "/metrics", "", ""},
	{"POST", "/api/sessions", "CreateRequest", "sessionAnswer"},
	{"GET", "/api/sessions", "", "sessionsAnswer"},
	{"POST", "/api/sessions/reattach", "reattachRequest", "sessionAnswer"},
	{"GET", "/api/sessions/{id}", "", "sessionAnswer"},
	{"PATCH", "/api/sessions/{id}", "patchSessionRequest", "sessionAnswer"},
	{"DELETE", "/api/sessions/{id}", "", ""},
	{"PATCH", "/api/sessions/{id}/context", "ContextRequest", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/start", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/pause", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/resume", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/heartbeat", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/restart", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/rotate", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/hibernate", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/interrupt", "", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/stop", "reasonRequest", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/cancel", "reasonRequest", "sessionAnswer"},
	{"POST", "/api/sessions/{id}/run", "RunRequest", "RunResult"},
	{"POST", "/api/sessions/{id}/exec", "ExecRequest", "ExecResult"},
	{"POST", "/api/sessions/{id}/complete", "completeRequest", "CompleteReply"},
	{"POST", "/api/execute", "ExecuteRequest", "RunResult"},
	{"GET", "/api/sessions/{id}/events", "", "eventsAnswer"},
	{"GET", "/api/sessions/{id}/executions", "", "executionsAnswer"},
	{"GET", "/api/sessions/{id}/tools", "", "toolsAnswer"},
	{"POST", "/api/sessions/{id}/tools", "ToolRequest", "toolAnswer"},
	{"GET", "/api/sessions/{id}/checkpoints", "", "checkpointsAnswer"},
	{"POST", "/api/sessions/{id}/checkpoint", "", "checkpointAnswer"},
	{"POST", "/api/sessions/{id}/checkpoints/{cid}/restore", "", "restoreAnswer"},
	{"GET", "/api/sessions/{id}/usage", "", "usageAnswer"},
	{"GET", "/api/sessions/{id}/files", "", "filesAnswer"},
	{"POST", "/api/sessions/{id}/files", "FileRequest", "fileAnswer"},
	{"GET", "/api/sessions/{id}/files/{path}", "", ""},
	{"PUT", "/api/sessions/{id}/files/{path}", "", "fileAnswer"},
	{"DELETE", "/api/sessions/{id}/files/{path}", "", ""},
	{"GET", "/api/sessions/{id}/ws", "", ""}, // frames: checked by the frame roots
	{"POST", "/api/sessions/{id}/fork", "ForkRequest", "forkAnswer"},
	{"GET", "/api/sessions/{id}/export", "", ""},                    // the archive, streamed to an io.Writer
	{"POST", "/api/sessions/import", "", "ImportResult"},            // the body is the caller's archive
	{"GET", "/api/sessions/{id}/notebook", "", ""},                  // the .ipynb, as bytes
	{"POST", "/api/sessions/{id}/notebook", rawJSON, "NotebookRun"}, // the caller's .ipynb
	{"GET", "/api/skills", "", "skillsAnswer"},
	{"GET", "/api/status", "", "NodeStatus"},
	{"GET", "/api/skills/{path}", "", ""},
	{"PUT", "/api/skills/{path}", "", "skillAnswer"},
	{"DELETE", "/api/skills/{path}", "", ""},
	{"POST", "/api/admin/keys", "CreateKeyRequest", "CreatedKey"},
	{"GET", "/api/admin/keys", "", "keysAnswer"},
	{"DELETE", "/api/admin/keys/{id}", "", ""},
}

// notWrapped lists the operations the client has no method for, with why.
var notWrapped = map[string]string{
	"GET /api/openapi.json":                        "the spec itself",
	"GET /readyz":                                  "a load balancer's readiness probe; its 503 is an answer, which the client would retry as a failure",
	"GET /api/sessions/{id}/variables":             "the UI's variable inspector",
	"GET /api/sessions/{id}/checkpoints/{cid}":     "the UI's checkpoint diff",
	"GET /api/sessions/{id}/variables/{name}/rows": "the UI's data viewer",
}

// constEnums maps the prefix of a group of the package's string constants to where the spec lists
// the same values.
var constEnums = map[string]string{
	"State":  "Session.state",
	"Code":   "ErrorObject.code",
	"Status": "RunResult.status",
	"Frame":  "WSServerFrame type",
	"Scope":  "APIKey.scope",
}

const specPath = "../../server/httpapi/openapi.json"

type schema = map[string]any

// pkg is the client package's source.
type pkg struct {
	types     map[string]*ast.StructType // struct types, by name
	other     map[string]ast.Expr        // other named types, by name
	frameType map[string]string          // type -> what its frameType method returns
	consts    map[string]string          // string constants, by name
	anon      []string                   // anonymous structs with JSON tags in functions
}

func loadPkg(t *testing.T) *pkg {
	fset := token.NewFileSet()
	files, err := filepath.Glob("../*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no client sources: %v", err)
	}
	p := &pkg{types: map[string]*ast.StructType{}, other: map[string]ast.Expr{},
		frameType: map[string]string{}, consts: map[string]string{}}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if st, ok := s.Type.(*ast.StructType); ok {
							p.types[s.Name.Name] = st
						} else {
							p.other[s.Name.Name] = s.Type
						}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if d.Tok == token.CONST && i < len(s.Values) {
								if lit, ok := s.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
									p.consts[n.Name], _ = strconv.Unquote(lit.Value)
								}
							}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "frameType" && len(d.Body.List) == 1 {
					ret, _ := d.Body.List[0].(*ast.ReturnStmt)
					if ret != nil && len(ret.Results) == 1 {
						if lit, ok := ret.Results[0].(*ast.BasicLit); ok {
							p.frameType[recvName(d)], _ = strconv.Unquote(lit.Value)
						}
					}
				}
				if d.Body == nil || d.Name.Name == "MarshalJSON" || d.Name.Name == "UnmarshalJSON" {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if st, ok := n.(*ast.StructType); ok && hasJSONTags(st) {
						p.anon = append(p.anon, fmt.Sprintf("%s (%s)", d.Name.Name, fset.Position(st.Pos())))
					}
					return true
				})
			}
		}
	}
	return p
}

func recvName(d *ast.FuncDecl) string {
	e := d.Recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func hasJSONTags(st *ast.StructType) bool {
	for _, f := range st.Fields.List {
		if f.Tag != nil && strings.Contains(f.Tag.Value, "json:") {
			return true
		}
	}
	return false
}

// field is a struct field as encoding/json sees it.
type field struct {
	json      string
	omitempty bool
	typ       ast.Expr
}

func fields(st *ast.StructType) []field {
	var out []field
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			raw, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(raw).Get("json")
		}
		if tag == "-" || len(f.Names) == 0 { // no embedded fields in the wire types
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		for _, n := range f.Names {
			if !ast.IsExported(n.Name) {
				continue
			}
			jn := name
			if jn == "" {
				jn = n.Name
			}
			out = append(out, field{json: jn, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty"), typ: f.Type})
		}
	}
	return out
}

type direction int

const (
	decode direction = iota // an answer the client reads
	encode                  // a body the client sends
)

func (d direction) String() string { return [...]string{"decoded", "sent"}[d] }

// checker walks Go types against schemas and collects what does not match.
type checker struct {
	p       *pkg
	schemas map[string]schema
	errs    []string
	reached map[string]bool
	done    map[string]bool // "type dir" already checked against its component
}

func (c *checker) errorf(where, format string, args ...any) {
	c.errs = append(c.errs, where+": "+fmt.Sprintf(format, args...))
}

func refName(s schema) string {
	r, _ := s["$ref"].(string)
	return strings.TrimPrefix(r, "#/components/schemas/")
}

// resolve follows a $ref.
func (c *checker) resolve(s schema) schema {
	for {
		n := refName(s)
		if n == "" {
			return s
		}
		s = c.schemas[n]
	}
}

func sub(s schema, key string) []schema {
	l, _ := s[key].([]any)
	var out []schema
	for _, x := range l {
		m, _ := x.(schema)
		out = append(out, m)
	}
	return out
}

// types is the set of JSON types a schema names ("type" as a string or a list).
func types(s schema) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, x.(string))
		}
		return out
	}
	return nil
}

// nullable says whether a schema allows null, and returns its non-null alternatives.
func (c *checker) nullable(s schema) (bool, []schema) {
	s2 := c.resolve(s)
	if alts := sub(s2, "anyOf"); alts != nil {
		null := false
		var rest []schema
		for _, a := range alts {
			if slices.Equal(types(a), []string{"null"}) {
				null = true
			} else {
				rest = append(rest, a)
			}
		}
		return null, rest
	}
	ts := types(s2)
	if slices.Contains(ts, "null") {
		return true, []schema{s}
	}
	return false, []schema{s}
}

// goKind classifies a Go type expression.
func (c *checker) goKind(e ast.Expr) (kind string, elem ast.Expr) {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "pointer", e.X
	case *ast.ArrayType:
		return "slice", e.Elt
	case *ast.MapType:
		return "map", e.Value
	case *ast.InterfaceType:
		return "raw", nil
	case *ast.StructType:
		return "struct", nil
	case *ast.SelectorExpr:
		switch x := e.X.(*ast.Ident).Name + "." + e.Sel.Name; x {
		case "time.Time":
			return "time", nil
		case "json.RawMessage":
			return "raw", nil
		default:
			return "unknown " + x, nil
		}
	case *ast.Ident:
		switch e.Name {
		case "string":
			return "string", nil
		case "bool":
			return "bool", nil
		case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
			return "integer", nil
		case "float32", "float64":
			return "number", nil
		case "any":
			return "raw", nil
		}
		if _, ok := c.p.types[e.Name]; ok {
			return "named", nil
		}
		if u, ok := c.p.other[e.Name]; ok {
			return c.goKind(u)
		}
	}
	return fmt.Sprintf("unknown %T", e), nil
}

// marshalsNull says whether a Go field without omitempty can be sent as null.
func (c *checker) marshalsNull(e ast.Expr) bool {
	k, _ := c.goKind(e)
	return k == "pointer" || k == "slice" || k == "map" || k == "raw"
}

// check checks a Go type against a schema.
func (c *checker) check(where string, e ast.Expr, s schema, dir direction) {
	kind, elem := c.goKind(e)
	if kind == "pointer" {
		c.check(where, elem, s, dir)
		return
	}
	if kind == "raw" {
		return // the client keeps the JSON as it is (json.RawMessage, any)
	}
	if _, alts := c.nullable(s); sub(c.resolve(s), "anyOf") != nil {
		c.checkAlternatives(where, e, alts, dir) // null decodes into any Go type
		return
	}
	if kind == "named" {
		c.checkNamed(where, e.(*ast.Ident).Name, s, dir)
		return
	}
	s = c.resolve(s)
	if alts := sub(s, "oneOf"); alts != nil {
		c.checkAlternatives(where, e, alts, dir)
		return
	}
	ts := slices.DeleteFunc(types(s), func(t string) bool { return t == "null" })
	if len(ts) != 1 {
		c.errorf(where, "the schema gives no single type (%v) but the Go type is %s: use json.RawMessage or any", ts, kind)
		return
	}
	switch want := ts[0]; want {
	case "string":
		format, _ := s["format"].(string)
		switch {
		case format == "date-time" && kind != "time":
			c.errorf(where, "Go %s for a date-time: use time.Time", kind)
		case format == "byte":
			// base64 in JSON: encoding/json's own for a []byte
			if el, ok := elem.(*ast.Ident); kind != "slice" || !ok || el.Name != "byte" {
				c.errorf(where, "Go %s for base64 bytes: use []byte", kind)
			}
		case format != "date-time" && kind != "string":
			c.errorf(where, "Go %s for a JSON string", kind)
		}
	case "integer", "boolean":
		if want == "boolean" {
			want = "bool"
		}
		if kind != want {
			c.errorf(where, "Go %s for a JSON %s", kind, ts[0])
		}
	case "number":
		if kind != "number" {
			c.errorf(where, "Go %s for a JSON number (a fraction would not decode)", kind)
		}
	case "array":
		if kind != "slice" {
			c.errorf(where, "Go %s for a JSON array", kind)
			return
		}
		items, _ := s["items"].(schema)
		c.check(where+"[]", elem, items, dir)
	case "object":
		switch kind {
		case "map":
			switch ap := s["additionalProperties"].(type) {
			case schema:
				c.check(where+"{}", elem, ap, dir)
			case bool:
				if !ap {
					c.errorf(where, "Go map for an object with fixed properties: use a struct")
				}
			case nil:
				if _, ok := s["properties"]; ok {
					c.errorf(where, "Go map for an object with fixed properties: use a struct")
				}
			}
		case "struct":
			c.checkStruct(where, e.(*ast.StructType), []schema{s}, dir)
		default:
			c.errorf(where, "Go %s for a JSON object", kind)
		}
	default:
		c.errorf(where, "JSON type %q not handled", want)
	}
}

// checkAlternatives checks a Go type against anyOf/oneOf alternatives: it must match one of them.
func (c *checker) checkAlternatives(where string, e ast.Expr, alts []schema, dir direction) {
	if len(alts) == 1 {
		c.check(where, e, alts[0], dir)
		return
	}
	if k, _ := c.goKind(e); k == "struct" || k == "named" {
		if k == "named" {
			c.checkNamed(where, e.(*ast.Ident).Name, schema{"oneOf": toAny(alts)}, dir)
			return
		}
	}
	var firstErrs []string
	for _, a := range alts {
		try := &checker{p: c.p, schemas: c.schemas, reached: map[string]bool{}, done: map[string]bool{}}
		try.check(where, e, a, dir)
		if len(try.errs) == 0 {
			for k := range try.reached {
				c.reached[k] = true
			}
			return
		}
		if firstErrs == nil {
			firstErrs = try.errs
		}
	}
	c.errorf(where, "the Go type matches none of the %d alternatives (first: %s)", len(alts), strings.Join(firstErrs, "; "))
}

func toAny(l []schema) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// checkNamed checks a named struct of the package where schema s is expected.
func (c *checker) checkNamed(where, name string, s schema, dir direction) {
	c.reached[name] = true
	st := c.p.types[name]
	ref := refName(s)
	decl, mirrored := mirrors[name]
	if ref == "" {
		if alts := sub(s, "oneOf"); alts != nil && mirrored {
			// A union type where one of several schemas is expected: each must be a variant.
			for _, a := range alts {
				if r := refName(a); r != decl && !slices.Contains(variants(c.schemas[decl]), r) {
					c.errorf(where, "Go %s (mirrors %s) where %s may come", name, decl, r)
				}
			}
			c.checkDecl(name, dir)
			return
		}
		// An inline schema: the Go type must match it (a mirrored one too: the spec may write a
		// component's shape again, like the fork answer's {"session": ...}).
		if _, ok := inline[name]; !ok && !mirrored {
			c.errorf(where, "Go %s is in neither the mirrors nor the inline table", name)
		}
		c.check(where, st, s, dir)
		return
	}
	if !mirrored {
		c.errorf(where, "Go %s stands for component %s: add it to the mirrors table", name, ref)
		return
	}
	if decl != ref && !slices.Contains(variants(c.schemas[decl]), ref) {
		c.errorf(where, "Go %s mirrors %s, but the spec has %s here", name, decl, ref)
		return
	}
	c.checkDecl(name, dir)
}

// checkDecl checks a mirrored type against its component, once per direction.
func (c *checker) checkDecl(name string, dir direction) {
	key := name + " " + dir.String()
	if c.done[key] {
		return
	}
	c.done[key] = true
	s := c.schemas[mirrors[name]]
	if alts := sub(s, "oneOf"); alts != nil {
		var vs []schema
		for _, a := range alts {
			vs = append(vs, c.resolve(a))
		}
		c.checkStruct(name, c.p.types[name], vs, dir)
		return
	}
	c.check(name, c.p.types[name], s, dir)
}

// variants names the $ref alternatives of a oneOf schema.
func variants(s schema) []string {
	var out []string
	for _, a := range sub(s, "oneOf") {
		if r := refName(a); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// checkStruct checks a struct against an object schema, or against the union of the variants of
// a oneOf (a Go struct holding any of them, like Output and Frame).
func (c *checker) checkStruct(where string, st *ast.StructType, objs []schema, dir direction) {
	props := map[string][]schema{} // property -> its schema in each object that has it
	requiredIn := map[string]int{}
	readOnly := map[string]bool{}
	for _, o := range objs {
		if ts := types(o); !slices.Equal(ts, []string{"object"}) {
			c.errorf(where, "Go struct for a schema of type %v", ts)
			return
		}
		ps, _ := o["properties"].(schema)
		for n, p := range ps {
			ps := p.(schema)
			props[n] = append(props[n], ps)
			if ro, _ := ps["readOnly"].(bool); ro {
				readOnly[n] = true
			}
		}
		req, _ := o["required"].([]any)
		for _, r := range req {
			requiredIn[r.(string)]++
		}
	}
	have := map[string]bool{}
	for _, f := range fields(st) {
		w := where + "." + f.json
		have[f.json] = true
		ps, ok := props[f.json]
		if !ok {
			c.errorf(w, "the Go field is not a property of the spec's schema (invented, or renamed in the spec?)")
			continue
		}
		if requiredIn[f.json] == len(objs) && f.omitempty {
			c.errorf(w, "required by the spec but omitempty in Go")
		}
		for _, p := range ps {
			// An optional field sent as null when unset must be nullable (a required one must be
			// set by the caller: null there is the caller's mistake, not the type's).
			if dir == encode && !f.omitempty && requiredIn[f.json] < len(objs) && c.marshalsNull(f.typ) {
				if null, _ := c.nullable(p); !null {
					c.errorf(w, "sent as null when unset, which the spec does not allow: add omitempty or make the spec nullable")
				}
			}
			c.check(w, f.typ, p, dir)
		}
	}
	var missing []string
	for n := range props {
		if have[n] || (dir == encode && readOnly[n]) {
			continue
		}
		if n == "type" && len(objs) == 1 && c.writtenType(where) {
			continue
		}
		if _, ok := notMirroredProps[strings.SplitN(where, ".", 2)[0]+"."+n]; ok {
			continue
		}
		missing = append(missing, n)
	}
	sort.Strings(missing)
	for _, n := range missing {
		c.errorf(where+"."+n, "a property of the spec's schema that the Go type drops (%s)", dir)
	}
}

// writtenType says whether where is a client frame whose "type" encodeFrame writes.
func (c *checker) writtenType(where string) bool {
	_, ok := c.p.frameType[where]
	return ok
}

func loadSpec(t *testing.T) schema {
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var spec schema
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func schemasOf(spec schema) map[string]schema {
	out := map[string]schema{}
	for n, s := range spec["components"].(schema)["schemas"].(schema) {
		out[n] = s.(schema)
	}
	return out
}

// jsonContent returns the application/json schema of a request body or answer, or nil.
func jsonContent(x schema) schema {
	content, _ := x["content"].(schema)
	j, _ := content["application/json"].(schema)
	s, _ := j["schema"].(schema)
	return s
}

// TestClientTypesMatchSpec is the check described in the package comment.
func TestClientTypesMatchSpec(t *testing.T) {
	p := loadPkg(t)
	spec := loadSpec(t)
	c := &checker{p: p, schemas: schemasOf(spec), reached: map[string]bool{}, done: map[string]bool{}}

	// Every operation is wrapped or listed as not wrapped.
	ops := map[string]schema{}
	for path, item := range spec["paths"].(schema) {
		for m, op := range item.(schema) {
			if o, ok := op.(schema); ok && m != "parameters" {
				ops[strings.ToUpper(m)+" "+path] = o
			}
		}
	}
	wrapped := map[string]bool{}
	for _, ep := range endpoints {
		key := ep.method + " " + ep.path
		wrapped[key] = true
		op, ok := ops[key]
		if !ok {
			c.errorf(key, "the client wraps an operation the spec does not have")
			continue
		}
		rb, _ := op["requestBody"].(schema)
		reqSchema := jsonContent(rb)
		switch {
		case ep.req == rawJSON:
			if reqSchema == nil {
				c.errorf(key, "the client sends JSON but the spec takes none")
			}
		case ep.req != "" && reqSchema == nil:
			c.errorf(key, "the client sends a JSON body (%s) but the spec takes none", ep.req)
		case ep.req != "":
			c.check(key+" request "+ep.req, ast.NewIdent(ep.req), reqSchema, encode)
		case reqSchema != nil:
			if req, _ := rb["required"].(bool); req {
				c.errorf(key, "the spec requires a JSON body the client does not send")
			}
		}
		var respSchema schema
		for status, r := range op["responses"].(schema) {
			if strings.HasPrefix(status, "2") {
				if s := jsonContent(r.(schema)); s != nil {
					respSchema = s
				}
			}
		}
		switch {
		case ep.resp != "" && respSchema == nil:
			c.errorf(key, "the client decodes a JSON answer (%s) but the spec gives none", ep.resp)
		case ep.resp != "":
			c.check(key+" answer "+ep.resp, ast.NewIdent(ep.resp), respSchema, decode)
		case respSchema != nil:
			c.errorf(key, "the spec gives a JSON answer the client does not decode into a type")
		}
	}
	for key := range ops {
		if !wrapped[key] {
			if _, ok := notWrapped[key]; !ok {
				c.errorf(key, "an operation of the spec the client does not wrap: wrap it, or list it in notWrapped with why")
			}
		} else if _, ok := notWrapped[key]; ok {
			c.errorf(key, "listed in notWrapped but wrapped")
		}
	}
	for key := range notWrapped {
		if _, ok := ops[key]; !ok {
			c.errorf(key, "listed in notWrapped but not in the spec")
		}
	}

	// Error answers and websocket frames.
	c.check("error answer", ast.NewIdent("errorAnswer"), schema{"$ref": "#/components/schemas/Error"}, decode)
	c.check("websocket server frame", ast.NewIdent("Frame"), schema{"$ref": "#/components/schemas/WSServerFrame"}, decode)
	clientFrames := map[string]bool{}
	for _, v := range variants(c.schemas["WSClientFrame"]) {
		clientFrames[v] = false
	}
	for name, ft := range p.frameType {
		decl := mirrors[name]
		if _, ok := clientFrames[decl]; !ok {
			c.errorf(name, "a client frame type whose mirrored schema (%q) is not a variant of WSClientFrame", decl)
			continue
		}
		clientFrames[decl] = true
		if want := constOf(c.schemas[decl], "type"); want != ft {
			c.errorf(name, "frameType() is %q but the spec's %s has type %q", ft, decl, want)
		}
		c.check("websocket client frame", ast.NewIdent(name), schema{"$ref": "#/components/schemas/" + decl}, encode)
	}
	for v, seen := range clientFrames {
		if !seen {
			c.errorf(v, "a client frame of the spec with no Go type (a type with a frameType method)")
		}
	}

	// Coverage: the tables name real types and schemas, every schema is mirrored or listed, every
	// JSON struct is reached, no anonymous JSON struct hides in a function.
	mirrored := map[string]bool{}
	for goName, s := range mirrors {
		mirrored[s] = true
		if _, ok := p.types[goName]; !ok {
			c.errorf(goName, "in the mirrors table but not a struct type of the package")
		}
		if _, ok := c.schemas[s]; !ok {
			c.errorf(goName, "mirrors %s, which is not a component of the spec", s)
		}
	}
	for goName := range inline {
		if _, ok := p.types[goName]; !ok {
			c.errorf(goName, "in the inline table but not a struct type of the package")
		}
	}
	for s := range c.schemas {
		_, listed := notMirrored[s]
		switch {
		case mirrored[s] && listed:
			c.errorf(s, "mirrored but listed in notMirrored")
		case !mirrored[s] && !listed:
			c.errorf(s, "a schema of the spec no Go type mirrors: mirror it, or list it in notMirrored with why")
		}
	}
	for s := range notMirrored {
		if _, ok := c.schemas[s]; !ok {
			c.errorf(s, "listed in notMirrored but not a component of the spec")
		}
	}
	for name, st := range p.types {
		if hasJSONTags(st) && !c.reached[name] {
			c.errorf(name, "a struct with JSON tags that no endpoint or frame reaches: add it to the tables")
		}
	}
	for _, a := range p.anon {
		c.errorf(a, "an anonymous struct with JSON tags: name it and add it to the tables so that it is checked")
	}

	// Constants.
	for prefix, at := range constEnums {
		var goVals []string
		for n, v := range p.consts {
			if rest, ok := strings.CutPrefix(n, prefix); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
				goVals = append(goVals, v)
			}
		}
		specVals := c.enumAt(at)
		sort.Strings(goVals)
		sort.Strings(specVals)
		if !slices.Equal(goVals, specVals) {
			c.errorf(prefix+"* constants", "%v, but %s is %v", goVals, at, specVals)
		}
	}

	sort.Strings(c.errs)
	for _, e := range c.errs {
		t.Error(e)
	}
}

// constOf returns the const of a property of an object schema.
func constOf(s schema, prop string) string {
	ps, _ := s["properties"].(schema)
	p, _ := ps[prop].(schema)
	v, _ := p["const"].(string)
	return v
}

// enumAt returns the values of "Schema.prop"'s enum, or the "type" consts of a oneOf's variants.
func (c *checker) enumAt(at string) []string {
	if name, ok := strings.CutSuffix(at, " type"); ok {
		var out []string
		for _, v := range variants(c.schemas[name]) {
			out = append(out, constOf(c.schemas[v], "type"))
		}
		return out
	}
	name, prop, _ := strings.Cut(at, ".")
	ps, _ := c.schemas[name]["properties"].(schema)
	p, _ := ps[prop].(schema)
	var out []string
	for _, v := range p["enum"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

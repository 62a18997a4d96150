package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
)

var fuzzSeedFlag = flag.Int64("fuzz.seed", 0, "seed of TestFuzzAPI's inputs (default: $CARRYOVER_FUZZ_SEED, else 1)")

// fuzzSeed is the seed of the fuzz: -fuzz.seed, else CARRYOVER_FUZZ_SEED, else 1.
func fuzzSeed(t *testing.T) int64 {
	if *fuzzSeedFlag != 0 {
		return *fuzzSeedFlag
	}
	if v := os.Getenv("CARRYOVER_FUZZ_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CARRYOVER_FUZZ_SEED=%q: %v", v, err)
		}
		return n
	}
	return 1
}

const (
	fuzzRunning = "fz-running" // fixture: a session with a live kernel
	fuzzPending = "fz-pending" // fixture: a session never started
	fuzzPerOp   = 20           // requests per operation (fewer for kernel-heavy ones)
	fuzzTimeout = 30 * time.Second
)

// TestFuzzAPI fuzzes every operation of openapi.json against a real server: valid bodies drawn
// from the request schemas, broken ones, hostile path parameters and query strings, and garbage
// websocket frames, all from a fixed seed. No answer may be a 5xx (but a run's own timeout), hang,
// or be an error outside the API's error shape; documented statuses only; 2xx bodies as described;
// nothing outside the workspaces touched; the server and the running session alive afterwards.
// What it found is pinned by TestFuzzFindings*. FUZZ_DEBUG=1 logs every websocket frame read.
func TestFuzzAPI(t *testing.T) {
	t.Parallel()
	start := time.Now()
	seed := fuzzSeed(t)
	t.Logf("seed %d (vary with -fuzz.seed=N or CARRYOVER_FUZZ_SEED=N)", seed)

	outside := t.TempDir() // not under the data dir: nothing may appear or change here
	canary := filepath.Join(outside, "canary.txt")
	if err := os.WriteFile(canary, []byte("canary\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, outside)

	ts := startServer(t, "")
	// Ready before the fixture claims the pool's kernel: /readyz answers 503 until the pool first
	// filled (readiness.go), and a fixture claiming the kernel that would have filled it, with the
	// fuzz's own claims then holding the refill back (kernel.RefillDelay), kept it 503 through the
	// whole fuzz on a fast machine.
	waitReady(t, ts.base)
	ts.newSession(client.CreateRequest{SessionID: fuzzRunning})
	if r := ts.run(fuzzRunning, "x = 1\n1+1"); resultOf(r) != "2" {
		t.Fatalf("fixture run: %s", dump(r))
	}
	ts.newSession(client.CreateRequest{SessionID: fuzzPending})

	f := newFuzzer(t, ts, seed, outside)
	for _, op := range f.ops {
		opStart := time.Now()
		f.fuzzOp(op)
		if d := time.Since(opStart); d > 2*time.Second {
			t.Logf("%s took %s", op.id, d.Round(time.Millisecond))
		}
	}
	wsStart := time.Now()
	f.fuzzWebsocket()
	t.Logf("websocket frames took %s", time.Since(wsStart).Round(time.Millisecond))

	// Afterwards: nothing outside touched, the server alive, the fixtures as they were.
	if after := treeOf(t, outside); after != before {
		t.Errorf("the directory outside the data dir changed:\nbefore %s\nafter  %s", before, after)
	}
	for _, p := range f.absInputs {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists: an absolute path given as input was written", p)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), fuzzTimeout)
	defer cancel()
	if err := ts.c.Health(ctx); err != nil {
		t.Fatalf("server not healthy after the fuzz: %v", err)
	}
	r, err := ts.c.Run(ctx, fuzzRunning, client.RunRequest{Code: "1+1"})
	if err != nil || resultOf(r) != "2" {
		t.Fatalf("running session does not answer 1+1 after the fuzz: %v %s", err, dump(r))
	}
	if s := ts.session(fuzzPending); s.State != "pending" {
		t.Errorf("pending fixture is %s after the fuzz", s.State)
	}
	t.Logf("%d requests, %d websocket frames in %s; statuses %s", f.requests, f.frames, time.Since(start).Round(time.Millisecond), f.statusSummary())
}

// treeOf describes every file under dir (path, size, mode, content hash).
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		h := fnv.New64a()
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		fmt.Fprintf(&b, "%s %d %v %x; ", strings.TrimPrefix(p, dir), info.Size(), info.Mode(), h.Sum64())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// apiOp is one operation of openapi.json.
type apiOp struct {
	id, method, path string // operationId, GET, /api/sessions/{id}/run
	ptr              string // JSON pointer of the operation object
	params           []map[string]any
	bodySchema       map[string]any // the application/json request schema, if any
	rawBody          bool           // an application/octet-stream body
}

// fuzzer holds the fuzz's state: the server, the generator, what it sent and saw.
type fuzzer struct {
	t       *testing.T
	ts      *testServer
	seed    int64
	ac      *answerChecker
	ops     []*apiOp
	outside string
	// absInputs are absolute paths (under outside) given as inputs: none may exist afterwards.
	absInputs []string

	victim   string // a throwaway session with a kernel, for operations that would end a fixture
	pendingV string // a throwaway session never started, for the same
	closed   bool   // fz-closed exists
	victims  int
	mu       sync.Mutex // guards requests and statuses: send may run on several goroutines
	requests int
	frames   int
	statuses map[int]int
	hc       *http.Client
	archive  []byte // the running fixture's export, for import cases (fuzzimport_test.go)
}

func newFuzzer(t *testing.T, ts *testServer, seed int64, outside string) *fuzzer {
	f := &fuzzer{t: t, ts: ts, seed: seed, outside: outside, statuses: map[int]int{},
		hc: &http.Client{Timeout: fuzzTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	// The description is the one the server serves.
	st, _, body, err := f.send("GET /api/openapi.json", "GET", "/api/openapi.json", nil, nil)
	if err != nil || st != 200 {
		t.Fatalf("GET /api/openapi.json: %d %v", st, err)
	}
	if f.ac, err = newAnswerChecker(body); err != nil {
		t.Fatal(err)
	}
	paths, _ := f.ac.doc["paths"].(map[string]any)
	for _, p := range sortedKeys(paths) {
		item, _ := paths[p].(map[string]any)
		var common []map[string]any
		if ps, ok := item["parameters"].([]any); ok {
			for _, x := range ps {
				m, _ := x.(map[string]any)
				common = append(common, m)
			}
		}
		for _, m := range []string{"get", "put", "post", "patch", "delete"} {
			o, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			op := &apiOp{method: strings.ToUpper(m), path: p, ptr: "#/paths/" + strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1") + "/" + m}
			op.id, _ = o["operationId"].(string)
			gen := &schemaGen{doc: f.ac.doc}
			for _, x := range common {
				op.params = append(op.params, gen.deref(x))
			}
			if ps, ok := o["parameters"].([]any); ok {
				for _, x := range ps {
					xm, _ := x.(map[string]any)
					op.params = append(op.params, gen.deref(xm))
				}
			}
			if rb, ok := o["requestBody"].(map[string]any); ok {
				content, _ := gen.deref(rb)["content"].(map[string]any)
				if js, ok := content["application/json"].(map[string]any); ok {
					op.bodySchema, _ = js["schema"].(map[string]any)
				} else {
					op.rawBody = true
				}
			}
			f.ops = append(f.ops, op)
		}
	}
	if len(f.ops) < 30 {
		t.Fatalf("openapi.json describes only %d operations", len(f.ops))
	}
	return f
}

func (f *fuzzer) statusSummary() string {
	var keys []int
	for k := range f.statuses {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d×%d", k, f.statuses[k]))
	}
	return strings.Join(parts, " ")
}

// send makes one request with the token (unless hdr sets Authorization) under the per-request
// deadline. A request that does not finish in time is an error naming it.
func (f *fuzzer) send(name, method, path string, hdr http.Header, body []byte) (int, http.Header, []byte, error) {
	f.mu.Lock()
	f.requests++
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(f.t.Context(), fuzzTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.ts.base+path, rd)
	if err != nil {
		// The URL does not parse on our side; send it as an opaque path instead.
		req, err = http.NewRequestWithContext(ctx, method, f.ts.base+"/", rd)
		if err != nil {
			return 0, nil, nil, err
		}
		req.URL.Opaque = strings.SplitN(path, "?", 2)[0]
		if q := strings.SplitN(path, "?", 2); len(q) == 2 {
			req.URL.RawQuery = q[1]
		}
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := f.hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return 0, nil, nil, fmt.Errorf("HUNG: no answer within %s: %v", fuzzTimeout, err)
		}
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusSwitchingProtocols {
		return res.StatusCode, res.Header, nil, nil
	}
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, res.Header, nil, fmt.Errorf("reading the answer: %v", err)
	}
	f.mu.Lock()
	f.statuses[res.StatusCode]++
	f.mu.Unlock()
	return res.StatusCode, res.Header, data, nil
}

// fuzzCase is one request of the fuzz.
type fuzzCase struct {
	name       string
	path       string // escaped path and query
	hdr        http.Header
	body       []byte
	validPath  bool // the path names this operation with real ids: its status must be documented
	mayTimeout bool // a run with a tiny timeout_seconds: 504 timeout is its own doing
}

// opKind classifies operations by what a valid call does to a session.
func opKind(op *apiOp) string {
	switch op.id {
	case "startSession", "pauseSession", "resumeSession", "stopSession", "cancelSession", "deleteSession",
		"restartSession", "rotateSession", "hibernateSession", "restoreCheckpoint":
		return "victim" // would end, stop or replace the fixture's kernel: a throwaway session
	case "run", "exec":
		return "turn" // kernel work, and would start the pending fixture: the running one only
	case "execute":
		return "execute" // a throwaway session and kernel per call
	}
	return "any"
}

// fuzzOp sends the operation's cases and checks every answer.
func (f *fuzzer) fuzzOp(op *apiOp) {
	h := fnv.New64a()
	h.Write([]byte(op.method + " " + op.path))
	r := rand.New(rand.NewPCG(uint64(f.seed), h.Sum64()))
	gen := &schemaGen{doc: f.ac.doc, r: r, fields: safeFields()}
	n, valid := fuzzPerOp, fuzzPerOp/5
	switch opKind(op) {
	case "turn":
		valid = 2
	case "execute":
		n, valid = 8, 1
	case "victim":
		n, valid = 8, 2
	}
	for i := 0; i < n; i++ {
		c := f.makeCase(op, gen, i, i < valid)
		f.do(op, c)
	}
	for _, c := range f.escapeCases(op) {
		f.do(op, c)
	}
}

// safeFields keeps generated values of these properties harmless: code a kernel runs in an
// instant, commands that touch nothing, paths inside the workspace, sessions that do not start.
func safeFields() map[string]func(r *rand.Rand) any {
	oneOf := func(vs ...any) func(r *rand.Rand) any { return func(r *rand.Rand) any { return vs[r.IntN(len(vs))] } }
	return map[string]func(r *rand.Rand) any{
		"code":            oneOf("1+1", "x = 2", "print('fz')", "", "y = 'é🙂'"),
		"command":         oneOf([]any{"true"}, []any{"echo", "fz"}, "echo fz", []any{"printf", "%s", "é"}),
		"timeout_seconds": oneOf(5.0, 10.0, nil),
		"working_dir":     oneOf("/workspace", "fzdir", "/workspace/fzdir/sub", ""),
		"path":            oneOf("fz/a.txt", "/workspace/fz/b.txt", "fz/日本.txt", "c.bin"),
		"language":        oneOf("python", "python3", ""),
		"start":           oneOf(false),
		"cursor_pos":      oneOf(0, 1, nil),
		"after_sequence":  oneOf(0, 1, 5),
	}
}

// hostile path values for each path parameter.
var hostileIDs = []string{"nope-fz", "..", ".", "%2e%2e", "a%2Fb", "%2F", strings.Repeat("a", 300), "%00", "%ff",
	"%C3%A9", fuzzRunning + "%00", fuzzRunning + "%2F..%2F..", "-bad", "a%20b", fuzzRunning + "%3Fx=1", "%2e%2e%2f%2e%2e", "reattach"}
var hostileCIDs = []string{"nope", "..", "%2F", strings.Repeat("c", 5000), "%00", "'%20OR%201=1%20--", "%ff", "-1"}
var hostileFiles = []string{"../x", "%2e%2e/x", "a/../../x", "%2Fetc%2Fpasswd", "/workspace/../x", "..%2F..%2Fcarryover.db",
	strings.Repeat("n", 300) + ".txt", strings.Repeat("d/", 3000) + "x", "a%00b", "fz/", "", "fz", "fz/a.txt/under",
	"%5C..%5Cx", ".hidden", "workspace", "%E6%97%A5/%F0%9F%99%82.txt", "%ff%fe", "%2Fworkspace", "%2Fworkspace%2F", "./x", "%2F%2F%2Fx"}

// hostile query strings for operations with query parameters (and junk for the others).
var hostileQueries = []string{"limit=-1", "limit=99999999999999999999", "limit=abc", "limit=1&limit=-1", "after_sequence=-5",
	"after_sequence=1e3", "after_sequence=9223372036854775807", "event_type=%00", "event_type=" + strings.Repeat("e", 10000),
	"limit=", "limit=%zz", "limit=0", "limit=1.5", "after_sequence=0x10", "limit=%2B5", "a=1&a=2&a=3", "token=wrong"}

// makeCase draws case i of op: a valid one (first ones), then broken bodies, hostile paths and
// hostile queries in turn.
func (f *fuzzer) makeCase(op *apiOp, gen *schemaGen, i int, valid bool) fuzzCase {
	r := gen.r
	c := fuzzCase{validPath: true}
	kind := "valid"
	if !valid {
		kind = []string{"body", "body", "path", "query"}[i%4]
	}
	// Path parameters.
	sid := f.sessionFor(op, r, valid, i)
	path := op.path
	var desc []string
	for _, p := range op.params {
		name, _ := p["name"].(string)
		in, _ := p["in"].(string)
		if in != "path" {
			continue
		}
		var v string
		switch name {
		case "id":
			v = sid
			if kind == "path" && r.IntN(2) == 0 {
				v = hostileIDs[r.IntN(len(hostileIDs))]
				c.validPath = false
			}
		case "cid":
			v = f.checkpointOf(sid)
			if kind == "path" && r.IntN(3) > 0 {
				v = hostileCIDs[r.IntN(len(hostileCIDs))]
				c.validPath = false
			}
		case "name": // a variable of the data viewer's rows
			v = []string{"fzvar", "df", "x"}[r.IntN(3)]
			if kind == "path" && r.IntN(2) == 0 {
				v = hostileIDs[r.IntN(len(hostileIDs))]
				c.validPath = false
			}
		case "path":
			v = url.PathEscape(fmt.Sprintf("fz%d.txt", r.IntN(5)))
			if kind == "path" {
				v = hostileFiles[r.IntN(len(hostileFiles))]
				c.validPath = false
			}
		}
		desc = append(desc, name+"="+v)
		path = strings.Replace(path, "{"+name+"}", v, 1)
	}
	if kind == "path" && c.validPath { // no path parameter was made hostile: garble the route itself
		path += []string{"/", "//", "/%2e%2e", "%00", "/extra"}[r.IntN(5)]
		c.validPath = false
	}
	// Query.
	var query []string
	for _, p := range op.params {
		if in, _ := p["in"].(string); in == "query" && r.IntN(2) == 0 {
			name, _ := p["name"].(string)
			sch, _ := p["schema"].(map[string]any)
			query = append(query, url.QueryEscape(name)+"="+url.QueryEscape(fmt.Sprint(gen.valid(sch, name, 0))))
		}
	}
	if kind == "query" {
		query = append(query, hostileQueries[r.IntN(len(hostileQueries))])
	}
	if len(query) > 0 {
		path += "?" + strings.Join(query, "&")
	}
	c.path = path
	// Headers (the websocket's Upgrade/Connection; never a complete handshake over plain HTTP).
	for _, p := range op.params {
		if in, _ := p["in"].(string); in == "header" && r.IntN(2) == 0 {
			if c.hdr == nil {
				c.hdr = http.Header{}
			}
			name, _ := p["name"].(string)
			sch, _ := p["schema"].(map[string]any)
			c.hdr.Set(name, printable(fmt.Sprint(gen.valid(sch, name, 0))))
		}
	}
	// Body.
	bodyDesc := "no body"
	switch {
	case op.bodySchema != nil && (kind == "body" || (kind != "valid" && r.IntN(3) == 0)):
		m := gen.invalid(op.bodySchema, 1<<20)
		c.body, bodyDesc = m.body, m.name
		if c.body == nil {
			c.body = []byte{}
		}
	case op.bodySchema != nil:
		c.body = mustJSON(gen.valid(op.bodySchema, "", 0))
		bodyDesc = "valid body"
	case op.rawBody && op.id == "importSession" && r.IntN(3) > 0:
		c.body, bodyDesc = f.importBody(r)
	case op.rawBody:
		switch r.IntN(4) {
		case 0:
			c.body, bodyDesc = []byte{}, "empty file"
		case 1:
			c.body, bodyDesc = bytes.Repeat([]byte{0xff, 0x00}, 1<<20), "file over the size limit"
		default:
			b := make([]byte, r.IntN(4096))
			for j := range b {
				b[j] = byte(r.IntN(256))
			}
			c.body, bodyDesc = b, "random bytes"
		}
	case kind == "body":
		c.body, bodyDesc = []byte(`{"unexpected": "body", "n": 1e400`), "garbage body to an operation without one"
	}
	c.mayTimeout = tinyTimeout(c.body)
	c.name = fmt.Sprintf("%s %s [%s; %s; %s] (case %d)", op.method, clipStr(c.path, 120), kind, strings.Join(desc, " "), bodyDesc, i)
	return c
}

// printable keeps the printable ASCII of s (what a header value may hold).
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, s)
}

func clipStr(s string, n int) string {
	if len(s) > n {
		return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// tinyTimeout reports whether body asks for a timeout_seconds under 2 s (its 504 is its own doing).
func tinyTimeout(body []byte) bool {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return bytes.Contains(body, []byte("timeout_seconds"))
	}
	v, ok := m["timeout_seconds"].(float64)
	return ok && v > 0 && v < 2
}

// sessionFor picks the session case i of op targets: a victim for operations that would end or
// replace a fixture's kernel (one with a kernel for the first valid case, or every valid case of
// the operations that need one; else a pending one, which costs no kernel).
func (f *fuzzer) sessionFor(op *apiOp, r *rand.Rand, valid bool, i int) string {
	switch opKind(op) {
	case "victim":
		switch {
		case valid && (i == 0 || !slices.Contains([]string{"stopSession", "cancelSession", "deleteSession"}, op.id)):
			return f.victimSession()
		case op.id == "startSession" || op.id == "restartSession":
			// Both give a pending session a kernel: their broken cases go to a closed session.
			return f.closedSession()
		default:
			return f.pendingVictim()
		}
	case "turn":
		return fuzzRunning
	}
	if r.IntN(2) == 0 {
		return fuzzPending
	}
	return fuzzRunning
}

// victimSession is a throwaway session with a kernel and a checkpoint, recreated once closed or gone.
func (f *fuzzer) victimSession() string {
	if f.victim != "" {
		ctx, cancel := context.WithTimeout(f.t.Context(), fuzzTimeout)
		s, err := f.ts.c.GetSession(ctx, f.victim)
		cancel()
		if err == nil && s.State != "completed" && s.State != "cancelled" && s.State != "failed" {
			if s.State == "paused" {
				f.ts.act(f.ts.c.Resume, f.victim)
			}
			return f.victim
		}
	}
	f.victims++
	f.victim = fmt.Sprintf("fz-victim-%d", f.victims)
	f.ts.newSession(client.CreateRequest{SessionID: f.victim})
	f.ts.run(f.victim, "v = 1")
	return f.victim
}

// pendingVictim is a throwaway session never started, recreated once it is not pending.
func (f *fuzzer) pendingVictim() string {
	if f.pendingV != "" {
		ctx, cancel := context.WithTimeout(f.t.Context(), fuzzTimeout)
		s, err := f.ts.c.GetSession(ctx, f.pendingV)
		cancel()
		if err == nil && s.State == "pending" {
			return f.pendingV
		}
	}
	f.victims++
	f.pendingV = fmt.Sprintf("fz-pending-victim-%d", f.victims)
	f.ts.newSession(client.CreateRequest{SessionID: f.pendingV})
	return f.pendingV
}

// closedSession is a cancelled throwaway session (created once).
func (f *fuzzer) closedSession() string {
	const id = "fz-closed"
	if !f.closed {
		f.ts.newSession(client.CreateRequest{SessionID: id})
		f.ts.act(func(ctx context.Context, id string) (*client.Session, error) { return f.ts.c.Cancel(ctx, id, "fuzz") }, id)
		f.closed = true
	}
	return id
}

// checkpointOf is the id of a session's newest checkpoint ("none" when it has none).
func (f *fuzzer) checkpointOf(id string) string {
	ctx, cancel := context.WithTimeout(f.t.Context(), fuzzTimeout)
	defer cancel()
	cps, err := f.ts.c.Checkpoints(ctx, id)
	if err != nil || len(cps) == 0 {
		return "none"
	}
	return cps[len(cps)-1].ID
}

// escapeCases are requests naming absolute paths outside the data dir; none may be written.
func (f *fuzzer) escapeCases(op *apiOp) []fuzzCase {
	target := func(name string) string {
		p := filepath.Join(f.outside, name)
		f.absInputs = append(f.absInputs, p)
		return p
	}
	sid := fuzzRunning
	base := strings.Replace(op.path, "{id}", sid, 1)
	switch op.id {
	case "writeFileJSON":
		return []fuzzCase{
			{name: "POST file at an absolute path outside", path: base, body: mustJSON(map[string]any{"path": target("evil1.txt"), "content": "x"}), validPath: true},
			{name: "POST file escaping by ..", path: base, body: mustJSON(map[string]any{"path": "/workspace/../../../../.." + target("evil2.txt"), "content": "x"}), validPath: true},
		}
	case "writeFile":
		return []fuzzCase{
			{name: "PUT file at an encoded absolute path outside", path: strings.Replace(base, "{path}", url.PathEscape(target("evil3.txt")), 1), body: []byte("x")},
			{name: "PUT file escaping by encoded ..", path: strings.Replace(base, "{path}", "..%2F..%2F..%2F..%2F..%2F.."+url.PathEscape(target("evil4.txt")), 1), body: []byte("x")},
		}
	case "exec":
		return []fuzzCase{{name: "exec in a working_dir outside", path: base, body: mustJSON(map[string]any{"command": []string{"touch", target("evil5.txt")}, "working_dir": f.outside}), validPath: true}}
	case "patchContext":
		return []fuzzCase{{name: "context working_dir outside", path: base, body: mustJSON(map[string]any{"working_dir": f.outside}), validPath: true}}
	}
	return nil
}

// do sends one case and checks its answer.
func (f *fuzzer) do(op *apiOp, c fuzzCase) {
	f.t.Helper()
	status, hdr, body, err := f.send(c.name, op.method, c.path, c.hdr, c.body)
	if err != nil {
		f.t.Errorf("%s: %v", c.name, err)
		return
	}
	if status == http.StatusSwitchingProtocols {
		if op.id != "websocket" {
			f.t.Errorf("%s: 101 from an operation that is not the websocket", c.name)
		}
		return
	}
	if status >= 400 && !strings.HasPrefix(c.path, "/api/") {
		// /healthz and /metrics garbled into unknown non-API paths: the mux's (or the UI's) own
		// 404, outside the API's error contract; still never a 5xx.
		if status >= 500 {
			f.t.Errorf("%s: server error %d: %s", c.name, status, clip(body))
		}
		return
	}
	if status >= 400 {
		code, err := f.ac.errorShape(status, body)
		if err != nil {
			f.t.Errorf("%s: %v", c.name, err)
			return
		}
		if status >= 500 && !(status == 504 && code == "timeout" && c.mayTimeout) {
			f.t.Errorf("%s: server error %d: %s", c.name, status, clip(body))
			return
		}
	}
	if !c.validPath {
		return
	}
	ptr, documented := f.ac.response(op, status)
	if !documented {
		f.t.Errorf("%s: status %d is not documented for %s: %s", c.name, status, op.id, clip(body))
		return
	}
	if ptr != "" && status < 400 && strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		if err := f.ac.validate(ptr, body); err != nil {
			f.t.Errorf("%s: answer %d %v: %s", c.name, status, err, clip(body))
		}
	}
}

// waitReady waits (fuzzTimeout at most) until the server at base answers GET /readyz with 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(fuzzTimeout)
	for {
		last := ""
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			last = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready after %s (last answer: %s)", fuzzTimeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

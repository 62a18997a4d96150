package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerServesPageAndAssets(t *testing.T) {
	h := Handler()
	cases := []struct {
		path, ctype string
		code        int
		contains    string
	}{
		{"/", "text/html; charset=utf-8", 200, `<script type="module" src="dist/app.js">`},
		{"/index.html", "text/html; charset=utf-8", 200, "<title>carryover</title>"},
		{"/?token=abc", "text/html; charset=utf-8", 200, "<title>carryover</title>"},
		{"/sessions/foo", "text/html; charset=utf-8", 200, "<title>carryover</title>"}, // client-side route
		{"/dist/app.js", "text/javascript; charset=utf-8", 200, "carryover.token"},
		{"/dist/app.css", "text/css; charset=utf-8", 200, "KaTeX_Main"},
		{"/dist/fonts/KaTeX_Main-Regular.woff2", "font/woff2", 200, ""},
		{"/app.css", "text/css; charset=utf-8", 200, "--accent"},
		{"/favicon.svg", "image/svg+xml", 200, "<svg"},
		{"/js/nope.js", "", 404, ""},
		{"/api/nope", "application/json", 404, `"code":"not_found"`},
		{"/api", "application/json", 404, `"code":"not_found"`},
	}
	for _, c := range cases {
		w := get(t, h, "GET", c.path, nil)
		if w.Code != c.code {
			t.Errorf("GET %s: status %d, want %d", c.path, w.Code, c.code)
			continue
		}
		if c.ctype != "" && w.Header().Get("Content-Type") != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, w.Header().Get("Content-Type"), c.ctype)
		}
		if !strings.Contains(w.Body.String(), c.contains) {
			t.Errorf("GET %s: body lacks %q", c.path, c.contains)
		}
		if c.code == 200 {
			if w.Header().Get("Cache-Control") != "no-cache" || w.Header().Get("ETag") == "" {
				t.Errorf("GET %s: caching headers %v", c.path, w.Header())
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: no nosniff", c.path)
			}
		}
	}
	w := get(t, h, "GET", "/", nil)
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("page CSP = %q", csp)
	}
	if w2 := get(t, h, "GET", "/", map[string]string{"If-None-Match": w.Header().Get("ETag")}); w2.Code != http.StatusNotModified {
		t.Errorf("revalidation: status %d, want 304", w2.Code)
	}
	if w := get(t, h, "POST", "/", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", w.Code)
	}
	if w := get(t, h, "HEAD", "/dist/app.js", nil); w.Code != 200 || w.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, %d body bytes", w.Code, w.Body.Len())
	}
}

// The isolated chart frame has a policy of its own: an opaque origin (CSP sandbox), eval there only,
// no connections, framed by this server's pages only; the page keeps refusing eval and every frame
// from elsewhere. The bundle's scripts answer CORS (the frame's module requests come from origin null).
func TestSandboxPagePolicy(t *testing.T) {
	h := Handler()
	w := get(t, h, "GET", "/sandbox.html", nil)
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"sandbox allow-scripts;", "script-src 'self' 'unsafe-eval';", "connect-src 'none'",
		"default-src 'none'", "frame-ancestors 'self'", "img-src data: blob:;"} {
		if !strings.Contains(csp, want) {
			t.Errorf("sandbox CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "allow-same-origin") || strings.Contains(csp, "allow-top-navigation") || strings.Contains(csp, "allow-popups") {
		t.Errorf("sandbox CSP %q gives the frame more than scripts", csp)
	}
	if !strings.Contains(w.Body.String(), `src="dist/sandbox.js"`) || w.Header().Get("X-Frame-Options") != "SAMEORIGIN" {
		t.Errorf("sandbox page: %v %q", w.Header(), w.Body.String())
	}
	page := get(t, h, "GET", "/", nil).Header()
	if p := page.Get("Content-Security-Policy"); strings.Contains(p, "unsafe-eval") || strings.Contains(p, "sandbox") || page.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the page's own policy changed: %q", p)
	}
	if got := get(t, h, "GET", "/dist/sandbox.js", nil).Header().Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("dist/sandbox.js: Access-Control-Allow-Origin %q, want *", got)
	}
	if got := get(t, h, "GET", "/index.html", nil).Header().Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("the page answers CORS: %q", got)
	}
}

// Text assets are served gzipped to clients that accept it (same bytes after decoding, own ETag,
// Vary set), and as they are to clients that do not.
func TestGzip(t *testing.T) {
	h := Handler()
	plain := get(t, h, "GET", "/dist/app.js", nil)
	gz := get(t, h, "GET", "/dist/app.js", map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
	if plain.Header().Get("Content-Encoding") != "" || gz.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("encodings %q / %q", plain.Header().Get("Content-Encoding"), gz.Header().Get("Content-Encoding"))
	}
	if gz.Header().Get("Vary") != "Accept-Encoding" || gz.Header().Get("ETag") == plain.Header().Get("ETag") {
		t.Errorf("headers: %v", gz.Header())
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(b, plain.Body.Bytes()) {
		t.Fatalf("gunzipped body differs (%v)", err)
	}
	if gz.Body.Len()*2 > plain.Body.Len() {
		t.Errorf("gzip %d bytes of %d", gz.Body.Len(), plain.Body.Len())
	}
	if w := get(t, h, "GET", "/dist/app.js", map[string]string{"Accept-Encoding": "gzip;q=0"}); w.Header().Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 got gzip")
	}
	if w := get(t, h, "GET", "/dist/fonts/KaTeX_Main-Regular.woff2", map[string]string{"Accept-Encoding": "gzip"}); w.Header().Get("Content-Encoding") != "" {
		t.Error("a font was gzipped")
	}
	if w := get(t, h, "GET", "/dist/app.js", map[string]string{"Accept-Encoding": "gzip", "If-None-Match": gz.Header().Get("ETag")}); w.Code != http.StatusNotModified {
		t.Errorf("revalidating the gzipped file: %d", w.Code)
	}
}

// DirHandler (server.web_dir) serves a folder from disk instead of the embedded files, read anew on each request
// (the UI development loop: edit src/, node build.mjs, reload the page).
func TestWebDirFromDisk(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("index.html", "<title>from disk</title>")
	write("dist/app.js", "one")
	h := DirHandler(dir)
	if w := get(t, h, "GET", "/sessions/x", nil); w.Code != 200 || w.Body.String() != "<title>from disk</title>" || w.Header().Get("Content-Security-Policy") == "" {
		t.Fatalf("a client route: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	first := get(t, h, "GET", "/dist/app.js", nil)
	if first.Body.String() != "one" || first.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("app.js: %q %v", first.Body.String(), first.Header())
	}
	write("dist/app.js", "two") // a rebuild: the next request sees it, under a new ETag
	if w := get(t, h, "GET", "/dist/app.js", map[string]string{"If-None-Match": first.Header().Get("ETag")}); w.Code != 200 || w.Body.String() != "two" {
		t.Fatalf("after a rebuild: %d %q", w.Code, w.Body.String())
	}
	if w := get(t, h, "GET", "/api/x", nil); w.Code != 404 || !strings.Contains(w.Body.String(), "not_found") {
		t.Errorf("/api/x: %d %q", w.Code, w.Body.String())
	}
	os.Remove(filepath.Join(dir, "index.html"))
	if w := get(t, h, "GET", "/", nil); w.Code != 500 || !strings.Contains(w.Body.String(), "index.html") {
		t.Errorf("without index.html: %d %q", w.Code, w.Body.String())
	}
}

// Nothing may be loaded from the internet at run time: no absolute URLs in src/href/import/url().
// One chunk is exempt, with its reason: plotly.js's (its LEGAL file names plotly.min.js) names map
// tile servers, map icons and attribution links for its map traces; the page's CSP (img-src and
// connect-src 'self') refuses those loads, so map traces draw without tiles, and src/charts.js gives
// plotly.js no topojson URL off the server. The page's own files and every other chunk are scanned.
func TestNoRemoteAssets(t *testing.T) {
	remote := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|(import|from)\s*\(?\s*["'](https?:)?//`)
	exempt := 0
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if legal, err := staticFS.ReadFile(p + ".LEGAL.txt"); err == nil && bytes.Contains(legal, []byte("plotly.js-dist-min/plotly.min.js")) {
			exempt++
			return nil
		}
		b, _ := staticFS.ReadFile(p)
		if m := remote.Find(b); m != nil {
			t.Errorf("%s loads a remote resource: %q", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if exempt != 1 {
		t.Errorf("%d chunks exempt as plotly.js's, want exactly 1", exempt)
	}
}

// The committed bundle (static/dist) must be what build.mjs makes of src/ and the locked npm packages:
// rebuild into a temporary folder and compare file by file.
func TestBundleMatchesSources(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to check the bundle: %v", err)
	}
	if _, err := os.Stat("node_modules/esbuild"); err != nil {
		t.Fatalf("esbuild is not installed: run `make web-deps` (cd web && npm ci): %v", err)
	}
	tmp := t.TempDir()
	if out, err := exec.Command(node, "build.mjs", tmp).CombinedOutput(); err != nil {
		t.Fatalf("node build.mjs: %v\n%s", err, out)
	}
	want := map[string][]byte{}
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(tmp, p)
		want[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	err = fs.WalkDir(staticFS, "static/dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, "static/dist/")
		got[rel] = true
		b, _ := staticFS.ReadFile(p)
		if w, ok := want[rel]; !ok {
			t.Errorf("static/dist/%s is not made by build.mjs any more: delete it (make web-bundle)", rel)
		} else if !bytes.Equal(w, b) {
			t.Errorf("static/dist/%s differs from a fresh build of src/: run `make web-bundle` and commit", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range want {
		if !got[rel] {
			t.Errorf("build.mjs makes %s but static/dist lacks it: run `make web-bundle` and commit", rel)
		}
	}
}

// The pure-JS parts (highlighter, ANSI, Markdown) have node tests in unit/; run them when node exists.
func TestJSUnits(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is required in CI")
		}
		t.Skip("node not installed")
	}
	out, err := exec.Command(node, "--test", "unit/").CombinedOutput()
	if err != nil {
		t.Fatalf("node --test unit/: %v\n%s", err, out)
	}
}

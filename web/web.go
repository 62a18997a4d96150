// Package web serves carryover's browser UI: a single page whose ES modules (src/) and npm packages
// are bundled by esbuild into static/dist (committed, see build.mjs), embedded into the binary so
// nothing is fetched from the internet at run time and `go build` alone needs no node.
//
// The server mounts Handler at "/". The page reads the API token from "/?token=..." once, keeps it in
// sessionStorage, and talks only to the public API (/api/..., see docs/api.md).
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed static
var staticFS embed.FS

// contentTypes is explicit so serving does not depend on the host's MIME tables (a missing
// text/javascript mapping would make browsers refuse the ES modules).
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".json":  "application/json",
	".txt":   "text/plain; charset=utf-8",
	".woff2": "font/woff2",
}

// csp allows only the page's own scripts; inline styles are needed by sanitized outputs (pandas,
// ANSI colours) and images come as data: URLs. connect-src 'self' covers same-origin ws/wss.
const csp = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// sandboxPage is the isolated chart frame (static/sandbox.html, src/isolated.js): charts whose library
// needs eval (plotly.js's WebGL traces) are drawn there instead of relaxing csp.
const sandboxPage = "sandbox.html"

// sandboxCSP is the frame's own policy: `sandbox allow-scripts` gives it an opaque origin however it
// is opened (no access to the page, its storage or its token; no popups, forms or top navigation);
// scripts only from this server, eval allowed here alone; no connections at all; images from data:
// and blob: only; and only this server's pages may frame it.
const sandboxCSP = "sandbox allow-scripts; default-src 'none'; script-src 'self' 'unsafe-eval'; " +
	"style-src 'self' 'unsafe-inline'; img-src data: blob:; font-src 'self'; connect-src 'none'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'self'"

type asset struct {
	body  []byte
	ctype string
	etag  string
	gz    *lazyGzip // gzip of body for text types (the bundle is a third of its size), nil otherwise
}

// lazyGzip is an asset's gzip, made on its first gzip request: at BestCompression the 7 MB of the
// bundle took ~0.5 s of CPU (tens of seconds under the race detector) in every process that served
// the UI, at start, though most never serve a byte of it (the cluster and benchmark nodes, the CLI's
// servers); made once, it is shared by every later request.
type lazyGzip struct {
	once sync.Once
	b    []byte
}

// of is body gzipped, or nil when gzip does not make it smaller.
func (z *lazyGzip) of(body []byte) []byte {
	z.once.Do(func() { z.b = gzipped(body) })
	return z.b
}

// compressible lists the types worth gzipping (fonts and images are compressed already).
func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || ctype == "application/json" || ctype == "image/svg+xml"
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	if buf.Len() >= len(b) {
		return nil
	}
	return buf.Bytes()
}

type handler struct {
	assets map[string]asset // by clean path without the leading slash; "" is unused
	index  asset
}

// Handler returns the http.Handler serving the UI: files from static/ at their paths, index.html for
// "/" and for every other path that is not a file (client-side routes), a JSON 404 under /api/.
func Handler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err == nil {
		var h *handler
		if h, err = newHandler(sub, true); err == nil {
			return h
		}
	}
	panic("web: reading embedded files: " + err.Error()) // cannot happen: the files are compiled in
}

// DirHandler serves dir as Handler does its embedded files, reading it again on every request: for
// work on the UI (the config key server.web_dir, e.g. `CARRYOVER_SERVER_WEB_DIR=web/static make run`),
// so `node build.mjs` and a browser reload show an edit of src/ without restarting the server.
func DirHandler(dir string) http.Handler { return diskHandler{os.DirFS(dir)} }

// diskHandler serves a folder as Handler does its embedded files, reading it anew for each request.
type diskHandler struct{ fsys fs.FS }

func (d diskHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, err := newHandler(d.fsys, false)
	if err != nil {
		http.Error(w, "server.web_dir: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.ServeHTTP(w, r)
}

// newHandler reads every file of fsys (the compressible ones gzipped on first request when compress
// is set).
func newHandler(fsys fs.FS, compress bool) (*handler, error) {
	h := &handler{assets: map[string]asset{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := contentTypes[path.Ext(p)]
		if ct == "" {
			ct = http.DetectContentType(b)
		}
		a := asset{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		if compress && compressible(ct) && len(b) > 1024 {
			a.gz = &lazyGzip{}
		}
		h.assets[p] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	index, ok := h.assets["index.html"]
	if !ok {
		return nil, errors.New("no index.html")
	}
	h.index = index
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := path.Clean("/" + r.URL.Path)
	if p == "/api" || strings.HasPrefix(p, "/api/") {
		apiNotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a, ok := h.assets[strings.TrimPrefix(p, "/")]
	if !ok || p == "/" {
		if path.Ext(p) != "" && p != "/index.html" {
			// a missing asset (a typo, an old cached name): a real 404, not the page
			http.NotFound(w, r)
			return
		}
		a = h.index
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	// No hashed file names: let browsers keep the files but revalidate each time (a cheap 304).
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Content-Type-Options", "nosniff")
	switch {
	case p == "/"+sandboxPage:
		hd.Set("Content-Security-Policy", sandboxCSP)
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "SAMEORIGIN")
	case a.ctype == h.index.ctype:
		hd.Set("Content-Security-Policy", csp)
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
	case strings.HasPrefix(p, "/dist/") && path.Ext(p) == ".js":
		// the sandboxed frame's origin is opaque, so its module scripts are cross-origin requests
		// (CORS, without credentials): the bundle is the same public code for every origin
		hd.Set("Access-Control-Allow-Origin", "*")
	}
	body := a.body
	if a.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			if gz := a.gz.of(a.body); gz != nil {
				hd.Set("Content-Encoding", "gzip")
				hd.Set("ETag", strings.TrimSuffix(a.etag, `"`)+`-gz"`)
				body = gz
			}
		}
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func apiNotFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": "not_found", "message": "no API endpoint " + r.Method + " " + r.URL.Path, "details": map[string]any{},
	}})
}

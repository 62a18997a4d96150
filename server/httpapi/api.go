// Package httpapi is carryover's own front door: the REST and websocket API of docs/api.md (with
// its extensions) over the session service. It decodes requests, calls the service, and
// maps errors to statuses in exactly one function (statusOf); it never reaches the store.
package httpapi

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/carryover/carryover"
)

const timeFormat = time.RFC3339Nano

// Options configure the API.
type Options struct {
	Tokens         map[string]string  // token -> tenant; every request to /api/ needs one of them or a key
	AdminToken     string             // the one of Tokens with admin scope (auth.token); the others have tenant scope
	Keys           carryover.KeyStore // the API keys (nil: config tokens only)
	RateLimit      RateLimit          // every credential's token bucket (zero: none)
	MaxBodyBytes   int64              // request bodies (and uploaded files) above this answer 413
	MaxImportBytes int64              // session archives above this answer 413 (0: DefaultMaxImportBytes)
	AllowedOrigins []string           // websocket origins allowed besides the server's own host
	UI             http.Handler       // served at / when not nil
	Logger         *slog.Logger
	// Metrics is what GET /metrics serves (the assembly's: the server's registry and the
	// process's); nil: the process's default registry.
	Metrics prometheus.Gatherer
}

// API is the HTTP + websocket surface over a session service.
type API struct {
	svc     Sessions
	maxBody int64
	origins map[string]bool
	log     *slog.Logger
	ui      http.Handler
	metrics http.Handler      // GET /metrics
	tenants map[string]string // token -> tenant
	admin   string            // the admin token
	keys    *keyVerifier
	limiter *limiter
	// clusterView is the cluster's loads for GET /api/status (nil on a single node: status.go).
	clusterView func() []carryover.NodeState
	// maxImport bounds an imported archive (portable.go).
	maxImport int64
	// diskView is data_dir's filesystem room for GET /api/status (nil: not shown; status_disk.go).
	diskView func() (DiskStatus, error)
	// readyCheck answers GET /readyz (nil: always ready; ready.go).
	readyCheck func() error
}

// New builds the API over svc.
func New(svc Sessions, o Options) *API {
	a := &API{svc: svc, maxBody: o.MaxBodyBytes, maxImport: o.MaxImportBytes, log: o.Logger, ui: o.UI, origins: map[string]bool{}, tenants: o.Tokens,
		admin: o.AdminToken, limiter: newLimiter(o.RateLimit, time.Now)}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.keys = newKeyVerifier(o.Keys, a.log)
	a.metrics = promhttp.Handler()
	if o.Metrics != nil { // as promhttp.Handler, on the given gatherer
		a.metrics = promhttp.InstrumentMetricHandler(prometheus.DefaultRegisterer, promhttp.HandlerFor(o.Metrics, promhttp.HandlerOpts{}))
	}
	for _, origin := range o.AllowedOrigins {
		a.origins[strings.TrimRight(origin, "/")] = true
	}
	return a
}

// route is one registered endpoint: a "METHOD /path" pattern and its one handler.
type route struct {
	pattern string
	handler http.Handler
}

// routes lists every endpoint the API registers; openapi.json describes each of them (a test
// checks both ways).
func (a *API) routes() []route {
	rs := []route{
		{"GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })},
		{"GET /readyz", http.HandlerFunc(a.ready)},
		{"GET /metrics", a.metrics},
		{"GET /api/openapi.json", http.HandlerFunc(serveOpenAPI)},
	}
	rs = append(rs, a.sessionRoutes()...)
	rs = append(rs, a.turnRoutes()...)
	rs = append(rs, a.recordRoutes()...)
	rs = append(rs, a.inspectRoutes()...)
	rs = append(rs, a.rowsRoutes()...)
	rs = append(rs, a.skillRoutes()...)
	rs = append(rs, a.keyRoutes()...)
	rs = append(rs, a.statusRoutes()...)
	rs = append(rs, a.portableRoutes()...)
	return append(rs,
		route{"GET /api/sessions/{id}/files", http.HandlerFunc(a.listFiles)},
		route{"POST /api/sessions/{id}/files", http.HandlerFunc(a.postFile)},
		route{"GET /api/sessions/{id}/files/{path...}", http.HandlerFunc(a.getFile)},
		route{"PUT /api/sessions/{id}/files/{path...}", http.HandlerFunc(a.putFile)},
		route{"DELETE /api/sessions/{id}/files/{path...}", http.HandlerFunc(a.deleteFile)},
		route{"GET /api/sessions/{id}/ws", http.HandlerFunc(a.websocket)},
	)
}

// Handler returns the routed, authenticated, panic-safe handler: one handler per route.
func (a *API) Handler() http.Handler {
	m := http.NewServeMux()
	for _, rt := range a.routes() {
		m.Handle(rt.pattern, scoped(rt.pattern, rt.handler))
	}
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, carryover.Errorf(carryover.CodeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	if a.ui != nil {
		m.Handle("/", a.ui)
	}
	return a.recoverer(a.auth(rejectDotDot(m)))
}

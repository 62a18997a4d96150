// Package jupyter is carryover's Jupyter front door: Jupyter Server's REST API (kernels, sessions,
// kernelspecs) and its kernel channels websocket, mounted at /jupyter/, so JupyterLab, VS Code,
// nbclient/papermill and jupyter_server --gateway-url use carryover as their kernel backend.
//
// A Jupyter kernel IS a carryover session (same id, UUID-shaped): an execute_request runs as one of
// the session's turns (server/session RunRaw), so its idle status reaches the client only after the
// turn's checkpoint committed; every other message goes to the kernel raw. The kernel survives its
// own death, hibernation and carryover's restart with its namespace; DELETE takes a final
// checkpoint and closes the session, it never destroys state.
package jupyter

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/carryover/carryover"
)

// Path is where the assembly mounts the handler (everything under it is ours).
const Path = "/jupyter/"

// Options configure the Jupyter front door.
type Options struct {
	// Authenticate finds the request's token and its tenant (the API's own check); ok false answers 401.
	Authenticate func(r *http.Request) (token, tenant string, ok bool)
	// StatusOf maps carryover's error codes to HTTP statuses: the API's own mapping (httpapi.StatusOf),
	// passed in by the assembly, so both front doors answer a code with the same status.
	StatusOf func(carryover.Code) int
	// RestartRestores makes POST .../restart restore the last checkpoint (carryover's restart)
	// instead of Jupyter's fresh namespace.
	RestartRestores bool
	Python          string // the interpreter named in the kernelspec's argv
	Logger          *slog.Logger
}

// Door is the Jupyter front door.
type Door struct {
	svc     Sessions
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	started time.Time

	mu       sync.Mutex
	bridges  map[string]*bridge // kernel id -> its websocket fan-out
	closing  bool
	activity time.Time
}

// New makes the front door over svc.
func New(svc Sessions, opts Options) *Door {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Python == "" {
		opts.Python = "python3"
	}
	d := &Door{svc: svc, opts: opts, log: opts.Logger, started: time.Now().UTC(), bridges: map[string]*bridge{}, activity: time.Now().UTC()}
	m := http.NewServeMux()
	m.HandleFunc("GET /jupyter/api", d.apiVersion)
	m.HandleFunc("GET /jupyter/api/{$}", d.apiVersion)
	m.HandleFunc("GET /jupyter/api/status", d.status)
	m.HandleFunc("GET /jupyter/api/me", d.me)
	m.HandleFunc("GET /jupyter/api/kernelspecs", d.kernelspecs)
	m.HandleFunc("GET /jupyter/api/kernelspecs/{name}", d.kernelspec)
	m.HandleFunc("GET /jupyter/api/kernels", d.listKernels)
	m.HandleFunc("POST /jupyter/api/kernels", d.startKernel)
	m.HandleFunc("GET /jupyter/api/kernels/{id}", d.getKernel)
	m.HandleFunc("DELETE /jupyter/api/kernels/{id}", d.deleteKernel)
	m.HandleFunc("POST /jupyter/api/kernels/{id}/interrupt", d.interruptKernel)
	m.HandleFunc("POST /jupyter/api/kernels/{id}/restart", d.restartKernel)
	m.HandleFunc("GET /jupyter/api/kernels/{id}/channels", d.channels)
	m.HandleFunc("GET /jupyter/api/sessions", d.listSessions)
	m.HandleFunc("POST /jupyter/api/sessions", d.createSession)
	m.HandleFunc("GET /jupyter/api/sessions/{id}", d.getSession)
	m.HandleFunc("PATCH /jupyter/api/sessions/{id}", d.patchSession)
	m.HandleFunc("DELETE /jupyter/api/sessions/{id}", d.deleteSession)
	m.HandleFunc("/jupyter/", func(w http.ResponseWriter, r *http.Request) {
		d.writeError(w, carryover.Errorf(carryover.CodeNotFound, "no such Jupyter endpoint %s %s", r.Method, r.URL.Path))
	})
	d.mux = m
	return d
}

// ServeHTTP authenticates and routes. The token comes as a header, ?token=, or in the path
// (/jupyter/token/<t>/api/...) for clients that cannot send headers on a websocket; XSRF headers
// and unknown query parameters are ignored.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/jupyter/token/"); ok {
		tok, tail, _ := strings.Cut(rest, "/")
		r = r.Clone(r.Context())
		r.URL.Path = "/jupyter/" + tail
		r.URL.RawPath = ""
		r.Header.Set("Authorization", "token "+tok)
	}
	_, tenant, ok := d.opts.Authenticate(r)
	if !ok {
		d.writeError(w, carryover.Errorf(carryover.CodeUnauthorized, "missing or wrong token"))
		return
	}
	d.mu.Lock()
	d.activity = time.Now().UTC()
	d.mu.Unlock()
	r = r.WithContext(carryover.NewContextWithTenant(r.Context(), tenant))
	d.mux.ServeHTTP(w, r)
}

// Shutdown closes every channels websocket with 1012 (service restart): JupyterLab reconnects on
// it, where 1000/1001 would make it give up. The kernels' sessions are the service's to close.
func (d *Door) Shutdown() {
	d.mu.Lock()
	d.closing = true
	all := make([]*bridge, 0, len(d.bridges))
	for _, b := range d.bridges {
		all = append(all, b)
	}
	d.mu.Unlock()
	for _, b := range all {
		b.closeConns(closeServiceRestart, "carryover is restarting")
	}
}

// writeError answers in Jupyter Server's error shape ({message, reason}) plus carryover's code.
func (d *Door) writeError(w http.ResponseWriter, err error) {
	e := carryover.ErrorOf(err)
	writeJSON(w, d.opts.StatusOf(e.Code), map[string]any{"message": e.Message, "reason": string(e.Code), "code": e.Code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readJSON decodes a small request body (at most 1 MiB); an empty body leaves v as it is. A
// field of the wrong type is named in JSON's words (carryover.UnmarshalRequest).
func readJSON(r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err != nil {
		return carryover.Errorf(carryover.CodeInvalid, "request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := carryover.UnmarshalRequest(data, v); err != nil {
		e := carryover.ErrorOf(err)
		return carryover.Errorf(carryover.CodeInvalid, "request body: %s", e.Message)
	}
	return nil
}

// bridgeFor returns the fan-out of kernel id, making it on first use.
func (d *Door) bridgeFor(id string) *bridge {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.bridges[id]
	if !ok {
		b = newBridge(d, id)
		d.bridges[id] = b
	}
	return b
}

// dropBridge forgets kernel id's fan-out (the kernel was shut down) and closes its sockets.
func (d *Door) dropBridge(id string) {
	d.mu.Lock()
	b := d.bridges[id]
	delete(d.bridges, id)
	d.mu.Unlock()
	if b != nil {
		b.close()
	}
}

// existingBridge returns kernel id's fan-out, nil when none.
func (d *Door) existingBridge(id string) *bridge {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bridges[id]
}

func ctxTenant(ctx context.Context) string { return carryover.TenantFromContext(ctx) }

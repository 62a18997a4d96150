package jupyter

// kernels.go: api, status, me, kernelspecs and kernels, in Jupyter Server's shapes.

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"regexp"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session"
)

// kernelKey marks a carryover session made by this front door (its value is the kernelspec name).
const kernelKey = "jupyter_kernel"

// specName is the one kernelspec: carryover's Python kernel. "python" and "" are aliases of it.
const specName = "python3"

// timeFormat is Jupyter's last_activity: exactly 6 fraction digits (the gateway client parses it with strptime).
const timeFormat = "2006-01-02T15:04:05.000000Z"

// uuidShape is what jupyter_server routes as a kernel or session id.
var uuidShape = regexp.MustCompile(`^\w+-\w+-\w+-\w+-\w+$`)

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func (d *Door) apiVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"version": "1.23.3", "server": "carryover"})
}

func (d *Door) status(w http.ResponseWriter, r *http.Request) {
	kernels := d.jupyterKernels(ctxTenant(r.Context()))
	conns := 0
	for _, k := range kernels {
		conns += d.connections(k.ID)
	}
	d.mu.Lock()
	act := d.activity
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"started": d.started.Format(timeFormat), "last_activity": act.Format(timeFormat),
		"kernels": len(kernels), "connections": conns})
}

func (d *Door) me(w http.ResponseWriter, r *http.Request) {
	t := ctxTenant(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{
		"identity":    map[string]any{"username": t, "name": t, "display_name": t, "initials": nil, "avatar_url": nil, "color": nil},
		"permissions": map[string]any{},
	})
}

func (d *Door) specModel() map[string]any {
	return map[string]any{"name": specName, "resources": map[string]any{}, "spec": map[string]any{
		"argv":           []string{d.opts.Python, "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		"display_name":   "Python 3 (carryover)",
		"language":       "python",
		"interrupt_mode": "signal",
		"env":            map[string]any{},
		"metadata":       map[string]any{"carryover": map[string]any{"persistent": true, "checkpoint": "every turn"}, "debugger": true},
	}}
}

func (d *Door) kernelspecs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"default": specName, "kernelspecs": map[string]any{specName: d.specModel()}})
}

func (d *Door) kernelspec(w http.ResponseWriter, r *http.Request) {
	if !isSpec(r.PathValue("name")) {
		d.writeError(w, carryover.Errorf(carryover.CodeNotFound, "kernelspec %q not found (carryover offers %q)", r.PathValue("name"), specName))
		return
	}
	writeJSON(w, http.StatusOK, d.specModel())
}

func isSpec(name string) bool { return name == "" || name == specName || name == "python" }

// jupyterKernels lists the tenant's open sessions this front door made, oldest first. A hibernated
// one is listed too: clients drop kernels that vanish from the list.
func (d *Door) jupyterKernels(tenant string) []carryover.Session {
	var out []carryover.Session
	for _, doc := range d.svc.List() {
		if _, ok := doc.Data[kernelKey]; ok && !doc.Closed() && doc.TenantName() == tenant {
			out = append(out, doc)
		}
	}
	return out
}

// kernelModel is Jupyter's kernel model of a session.
func (d *Door) kernelModel(doc carryover.Session) map[string]any {
	state := "idle"
	switch {
	case doc.Closed():
		state = "dead"
	case doc.Sandbox.Status == carryover.SandboxStarting:
		state = "starting"
	default:
		if b := d.existingBridge(doc.ID); b != nil && b.busy() {
			state = "busy"
		}
	}
	return map[string]any{"id": doc.ID, "name": specName, "last_activity": doc.LastActivity.UTC().Format(timeFormat),
		"execution_state": state, "connections": d.connections(doc.ID)}
}

func (d *Door) connections(id string) int {
	if b := d.existingBridge(id); b != nil {
		return b.connCount()
	}
	return 0
}

// lookup returns the tenant's open session id, or not_found.
func (d *Door) lookup(r *http.Request, id string) (carryover.Session, error) {
	doc, err := d.svc.Get(id)
	if err != nil || doc.TenantName() != ctxTenant(r.Context()) || doc.Closed() {
		return carryover.Session{}, carryover.Errorf(carryover.CodeNotFound, "kernel %q not found", id)
	}
	return doc, nil
}

func (d *Door) listKernels(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, doc := range d.jupyterKernels(ctxTenant(r.Context())) {
		out = append(out, d.kernelModel(doc))
	}
	writeJSON(w, http.StatusOK, out)
}

// startKernelRequest is POST api/kernels' body.
type startKernelRequest struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

func (d *Door) startKernel(w http.ResponseWriter, r *http.Request) {
	var req startKernelRequest
	if err := readJSON(r, &req); err != nil {
		d.writeError(w, err)
		return
	}
	doc, err := d.newKernel(r, req.Name, req.Path)
	if err != nil {
		d.writeError(w, err)
		return
	}
	w.Header().Set("Location", "/jupyter/api/kernels/"+doc.ID)
	writeJSON(w, http.StatusCreated, d.kernelModel(doc))
}

// newKernel makes a carryover session for a Jupyter kernel and starts it.
func (d *Door) newKernel(r *http.Request, name, path string) (carryover.Session, error) {
	if !isSpec(name) {
		return carryover.Session{}, carryover.Errorf(carryover.CodeNotFound, "kernelspec %q not found (carryover offers %q)", name, specName)
	}
	title := "jupyter"
	if path != "" {
		title = "jupyter: " + path
	}
	doc, err := d.svc.Create(r.Context(), session.CreateRequest{SessionID: newUUID(), Name: title,
		Data: map[string]any{kernelKey: specName}, Start: true})
	if err != nil {
		return carryover.Session{}, err
	}
	return doc, nil
}

func (d *Door) getKernel(w http.ResponseWriter, r *http.Request) {
	doc, err := d.lookup(r, r.PathValue("id"))
	if err != nil {
		d.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d.kernelModel(doc))
}

// deleteKernel is Jupyter's shutdown: a final checkpoint, then the session closes. Nothing is
// destroyed (carryover's own DELETE /api/sessions/{id} purges).
func (d *Door) deleteKernel(w http.ResponseWriter, r *http.Request) {
	if err := d.shutdownKernel(r, r.PathValue("id")); err != nil {
		d.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *Door) shutdownKernel(r *http.Request, id string) error {
	if _, err := d.lookup(r, id); err != nil {
		return err
	}
	if b := d.existingBridge(id); b != nil {
		b.stopRunning(r.Context()) // Jupyter's shutdown abandons queued cells and interrupts the running one
	}
	if _, err := d.svc.Stop(r.Context(), id, "jupyter shutdown"); err != nil {
		return err
	}
	d.dropBridge(id)
	return nil
}

func (d *Door) interruptKernel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := d.lookup(r, id); err != nil {
		d.writeError(w, err)
		return
	}
	if err := d.onSession(id, func(ls *session.Session) error { return ls.Interrupt(r.Context()) }); err != nil {
		d.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// restartKernel is Jupyter's restart (fresh namespace, files kept), or carryover's (the last
// checkpoint restored) with Options.RestartRestores.
func (d *Door) restartKernel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := d.lookup(r, id); err != nil {
		d.writeError(w, err)
		return
	}
	b := d.bridgeFor(id)
	b.abortQueued()
	err := d.onSession(id, func(ls *session.Session) error {
		if d.opts.RestartRestores {
			_, err := ls.Restart(r.Context())
			return err
		}
		return ls.RestartFresh(r.Context())
	})
	if err != nil {
		d.writeError(w, err)
		return
	}
	if k, kerr := d.kernelOf(r.Context(), id); kerr == nil {
		b.comms.Switch(k) // a restart the client asked for: it drops its comms itself, nothing to tell
		b.attach(k, nil)
	}
	b.broadcastStatus("starting")
	b.broadcastStatus("idle")
	doc, err := d.lookup(r, id)
	if err != nil {
		d.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d.kernelModel(doc))
}

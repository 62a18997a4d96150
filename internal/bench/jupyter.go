package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel"
)

// The Jupyter front door (/jupyter/): `1+1` over its channels websocket, the turn's checkpoint
// included (its idle is sent after the commit), beside raw kernel/ over ZMQ and Debian's Jupyter
// Server websocket, round robin in the same run. Both websockets speak the same legacy JSON framing
// through the same client code (jupyterPeer.execute).

func benchJupyterSection(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	python := env.python()
	runs, batch, warm := 300, 25, 30
	if env.Quick {
		runs, batch, warm = 6, 3, 2
	}
	h, err := startBenchSrv(ctx, env, "jupyter", func(c *configs.Config) { c.Pool.Size = 1 })
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := stopSrv(h, "jupyter front door", &rows); err == nil && serr != nil {
			err = serr
		}
	}()
	paths, jp, done, err := jupyterSetUp(ctx, env, h, python)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := rtWarm(paths, warm); err != nil {
		return nil, err
	}
	if err := rtMeasure(paths, runs, batch); err != nil {
		return nil, err
	}
	return jupyterRows(paths, batch, h.sandboxNote(), jp.Version), nil
}

// jupyterSetUp opens carryover's /jupyter/ channels, a raw kernel and Jupyter Server, and returns
// the three paths of `1+1` through them (done stops the three).
func jupyterSetUp(ctx context.Context, env *benchEnv, h *benchSrv, python string) (paths []*rtPath, jp *jupyterPeer, done func(), err error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	done = stopAll
	defer func() {
		if err != nil {
			stopAll() // not done: a failed return has set it to nil
		}
	}()
	ours, err := dialJupyterDoor(ctx, h)
	if err != nil {
		return nil, nil, nil, err
	}
	stops = append(stops, func() { ours.ws.Close() })
	k, err := rawKernel(ctx, env, python, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	stops = append(stops, func() { _ = k.Shutdown(context.Background()) })
	if jp, err = startJupyterPeer(ctx, filepath.Join(env.Scratch, "jupyter-front-door"), python); err != nil {
		return nil, nil, nil, err
	}
	stops = append(stops, jp.close)
	wsOne := func(p *jupyterPeer) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			d, result, err := p.execute("1+1")
			if err == nil && result != "2" {
				err = fmt.Errorf("1+1: result %q", result)
			}
			return d, err
		}
	}
	rawOne := func() (time.Duration, error) {
		t0 := time.Now()
		res, err := k.Execute(ctx, "1+1", kernel.ExecOptions{StoreHistory: true})
		if err == nil && res.Status != "ok" {
			err = fmt.Errorf("raw 1+1: %s", res.Status)
		}
		return time.Since(t0), err
	}
	return []*rtPath{{name: "carryover /jupyter", one: wsOne(ours)}, {name: "raw kernel/", one: rawOne},
		{name: "Jupyter Server", one: wsOne(jp)}}, jp, done, nil
}

// jupyterRows are the front door's figures beside raw ZMQ and Jupyter Server.
func jupyterRows(paths []*rtPath, batch int, sandboxNote, jupyterVersion string) []benchRow {
	door, raw, jup := paths[0].ds, paths[1].ds, paths[2].ds
	n := fmt.Sprintf("n=%d each, 3 paths round robin in batches of %d; %s", len(door), batch, sandboxNote)
	return []benchRow{
		{Name: "1+1 Jupyter channels ws incl. checkpoint (median)", Ours: fmtDur(srvMedian(door)), Peer: fmtDur(srvMedian(raw)) + " raw",
			Ratio: ratio(srvMedian(door), srvMedian(raw)), Note: verdict(float64(srvMedian(door)) <= 1.2*float64(srvMedian(raw)), "<= 1.2x raw ZMQ") + "; " + n},
		{Name: "1+1 Jupyter channels ws incl. checkpoint (p99)", Ours: fmtDur(srvP99(door)), Peer: fmtDur(srvP99(raw)) + " raw",
			Ratio: ratio(srvP99(door), srvP99(raw))},
		{Name: "1+1 Jupyter channels ws vs Jupyter Server ws (median)", Ours: fmtDur(srvMedian(door)), Peer: fmtDur(srvMedian(jup)),
			Ratio: ratio(srvMedian(door), srvMedian(jup)), Note: verdict(8*float64(srvMedian(door)) <= float64(srvMedian(jup)), ">= 8x faster than Jupyter Server") +
				fmt.Sprintf("; Jupyter Server %s, same client code, until execute_reply and iopub idle", jupyterVersion)},
		{Name: "1+1 Jupyter channels ws vs Jupyter Server ws (p99)", Ours: fmtDur(srvP99(door)), Peer: fmtDur(srvP99(jup)),
			Ratio: ratio(srvP99(door), srvP99(jup))},
	}
}

// dialJupyterDoor starts a kernel through carryover's /jupyter/api/kernels and opens its channels
// websocket (legacy JSON framing, as the Jupyter Server peer's).
func dialJupyterDoor(ctx context.Context, h *benchSrv) (*jupyterPeer, error) {
	p := &jupyterPeer{base: h.base + "/jupyter", token: h.token, session: benchRandHex(16)}
	var k struct {
		ID string `json:"id"`
	}
	if err := p.call(ctx, "POST", "/api/kernels", map[string]any{"name": "python3"}, &k); err != nil {
		return nil, err
	}
	u := strings.Replace(p.base, "http", "ws", 1) + "/api/kernels/" + k.ID + "/channels?session_id=" + p.session
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, u, http.Header{"Authorization": {"token " + h.token}})
	if err != nil {
		return nil, fmt.Errorf("carryover /jupyter websocket: %w", err)
	}
	p.ws = ws
	return p, nil
}

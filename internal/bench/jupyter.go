package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	python := env.Cfg.Kernel.Python
	if python == "" {
		python = "/usr/bin/python3"
	}
	runs, batch, warm := 300, 25, 30
	if env.Quick {
		runs, batch, warm = 60, 10, 10
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
	ours, err := dialJupyterDoor(ctx, h)
	if err != nil {
		return nil, err
	}
	defer ours.ws.Close()
	spec, err := kernel.FindSpec("python", python)
	if err != nil {
		return nil, err
	}
	k, err := kernel.Start(ctx, kernel.Options{
		Spec: spec, Transport: env.Cfg.Kernel.Transport, WorkDir: env.Scratch,
		StartupTimeout:    configs.Seconds(max(env.Cfg.Kernel.StartupTimeoutSeconds, 60)),
		ShutdownGrace:     configs.Seconds(env.Cfg.Kernel.ShutdownGraceSeconds),
		HeartbeatInterval: time.Duration(env.Cfg.Kernel.HeartbeatIntervalMS) * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, fmt.Errorf("raw kernel: %w", err)
	}
	defer k.Shutdown(context.Background())
	jp, err := startJupyterPeer(ctx, filepath.Join(env.Scratch, "jupyter-front-door"), python)
	if err != nil {
		return nil, err
	}
	defer jp.close()

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
	names := []string{"carryover /jupyter", "raw kernel/", "Jupyter Server"}
	ones := []func() (time.Duration, error){wsOne(ours), rawOne, wsOne(jp)}
	ds := make([][]time.Duration, len(ones))
	for i, one := range ones {
		for range warm {
			if _, err := one(); err != nil {
				return nil, fmt.Errorf("warm-up %s: %w", names[i], err)
			}
		}
	}
	for round := 0; round*batch < runs; round++ {
		for j := range ones {
			i := (round + j) % len(ones) // rotate who goes first
			for range batch {
				d, err := ones[i]()
				if err != nil {
					return nil, fmt.Errorf("%s: %w", names[i], err)
				}
				ds[i] = append(ds[i], d)
			}
		}
	}
	door, raw, jup := ds[0], ds[1], ds[2]
	n := fmt.Sprintf("n=%d each, 3 paths round robin in batches of %d; %s", len(door), batch, h.sandboxNote())
	rows = append(rows,
		benchRow{Name: "1+1 Jupyter channels ws incl. checkpoint (median)", Ours: fmtDur(srvMedian(door)), Peer: fmtDur(srvMedian(raw)) + " raw",
			Ratio: ratio(srvMedian(door), srvMedian(raw)), Note: verdict(float64(srvMedian(door)) <= 1.2*float64(srvMedian(raw)), "<= 1.2x raw ZMQ") + "; " + n},
		benchRow{Name: "1+1 Jupyter channels ws incl. checkpoint (p99)", Ours: fmtDur(srvP99(door)), Peer: fmtDur(srvP99(raw)) + " raw",
			Ratio: ratio(srvP99(door), srvP99(raw))},
		benchRow{Name: "1+1 Jupyter channels ws vs Jupyter Server ws (median)", Ours: fmtDur(srvMedian(door)), Peer: fmtDur(srvMedian(jup)),
			Ratio: ratio(srvMedian(door), srvMedian(jup)), Note: verdict(8*float64(srvMedian(door)) <= float64(srvMedian(jup)), ">= 8x faster than Jupyter Server") +
				fmt.Sprintf("; Jupyter Server %s, same client code, until execute_reply and iopub idle", jp.Version)},
		benchRow{Name: "1+1 Jupyter channels ws vs Jupyter Server ws (p99)", Ours: fmtDur(srvP99(door)), Peer: fmtDur(srvP99(jup)),
			Ratio: ratio(srvP99(door), srvP99(jup))},
	)
	return rows, nil
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

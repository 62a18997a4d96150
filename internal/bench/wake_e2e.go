package bench

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/persistence/sqlite"
)

// The wake-e2e section wakes hibernated sessions through the API, end to end, on the configured
// sandbox (on by default): the run that finds no kernel claims
// one from the pool, restores the last checkpoint into it and runs the cell (its own checkpoint
// included).
//   - 1 GiB: a numpy array (random, so nothing dedups or compresses), beside reading the same chunks
//     from the same SQLite file (decoded and verified, as a restore must), measured right before each
//     wake so both find the same page cache.
//   - a data-science namespace (pandas frames, a fitted sklearn model, seaborn figures), beside dill
//     loading the same variables (dumped by the session's kernel) into a fresh kernel that imported
//     the same persistence.pre_import modules, as the pool's kernels do, plus the same cell.

func benchWakeE2E(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	h, err := startBenchSrv(ctx, env, "wakee2e", func(c *configs.Config) {
		c.Pool.Size = 1
		c.Cull.IdleSeconds = 0
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, serr := h.stop(); err == nil {
			err = serr
		}
	}()
	reps := 3
	if env.Quick {
		reps = 1
	}
	big, err := benchWakeBig(ctx, env, h, reps)
	if err != nil {
		return nil, err
	}
	rows = append(rows, big...)
	row, err := benchWakeDS(ctx, env, h, reps)
	if err != nil {
		return rows, err
	}
	return append(rows, row), nil
}

// wakeRun hibernates the session, lets the pool refill and times the run that wakes it.
func wakeRun(ctx context.Context, h *benchSrv, id, probe string, before func() error) (time.Duration, string, error) {
	if _, err := h.c.Hibernate(ctx, id); err != nil {
		return 0, "", err
	}
	h.settle(1500 * time.Millisecond) // the pool refills, as between an agent's turns
	if before != nil {
		if err := before(); err != nil {
			return 0, "", err
		}
	}
	d, a, err := h.run(ctx, id, probe)
	if err != nil || a.Status != "ok" {
		return 0, "", fmt.Errorf("wake: %v %+v", err, a.Error)
	}
	return d, wakeSplit(ctx, h, id, a), nil
}

func benchWakeBig(ctx context.Context, env *benchEnv, h *benchSrv, reps int) ([]benchRow, error) {
	st, err := sqlite.Open(filepath.Join(env.Scratch, "server-wakee2e", "carryover.db"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	id, _, err := h.createSession(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = h.c.DeleteSession(ctx, id) }()
	elems, size := env.bigArray()
	if _, a, err := h.run(ctx, id, fmt.Sprintf("import numpy as np\nbig = np.random.default_rng(0).random(%d)\nlabel = 'x'", elems)); err != nil || a.Status != "ok" {
		return nil, fmt.Errorf("setup: %v %+v", err, a.Error)
	}
	var wakes, floors, fullWakes, fullPeers []time.Duration
	var last, lastFull string
	for i := 0; i < reps; i++ {
		var floor time.Duration
		var n int64
		d, split, err := wakeRun(ctx, h, id, "float(big[:4].sum())", func() (err error) {
			floor, n, err = chunkReadFloor(ctx, st, id)
			return err
		})
		if err != nil {
			return nil, err
		}
		wakes, floors = append(wakes, d), append(floors, floor)
		last = fmt.Sprintf("%s read; %s", fmtBytes(n), split)
		// The same wake with a cell that reads all of it: the lazy fill cannot hide behind the cell.
		d, split, err = wakeRun(ctx, h, id, "float(big.sum())", nil)
		if err != nil {
			return nil, err
		}
		live, _, err := h.run(ctx, id, "float(big.sum())")
		if err != nil {
			return nil, err
		}
		fullWakes, fullPeers = append(fullWakes, d), append(fullPeers, floor+live)
		lastFull = fmt.Sprintf("%s; the cell on the live kernel %s", split, fmtDur(live))
	}
	w, f := percentile(wakes, 50), percentile(floors, 50)
	fw, fp := percentile(fullWakes, 50), percentile(fullPeers, 50)
	return []benchRow{{Name: "wake of " + size + ", end to end (median)", Ours: fmtDur(w), Peer: fmtDur(f) + " (SQLite chunk read)",
		Ratio: fmt.Sprintf("%s; %s", ratio(w, f), verdict(float64(w) <= 1.5*float64(f), "<= 1.5x the read")),
		Note:  fmt.Sprintf("n=%d; claim + restore + the cell `float(big[:4].sum())` (its checkpoint included); last: %s", reps, last)},
		{Name: "wake of " + size + ", a cell reading all of it (median)", Ours: fmtDur(fw), Peer: fmtDur(fp) + " (read + the live cell)",
			Ratio: fmt.Sprintf("%s; %s", ratio(fw, fp), verdict(float64(fw) <= 1.5*float64(fp), "<= 1.5x read + cell")),
			Note:  fmt.Sprintf("n=%d; `float(big.sum())`: every page must be in before the cell ends; last: %s", reps, lastFull)}}, nil
}

// chunkReadFloor reads every chunk of the session's latest checkpoint's namespace, as a restore
// must have them (decoded, verified), into nothing.
func chunkReadFloor(ctx context.Context, st *sqlite.Store, id string) (time.Duration, int64, error) {
	cp, err := st.LatestCheckpoint(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	m, err := persistence.ParseManifest(cp)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	var n int64
	for _, g := range m.Groups {
		if g.Ref == "" {
			continue
		}
		hs, err := persistence.GroupChunks(ctx, st, g.Ref)
		if err != nil {
			return 0, 0, err
		}
		for _, h := range hs {
			w, err := st.ReadChunkTo(ctx, h, io.Discard)
			if err != nil {
				return 0, 0, err
			}
			n += w
		}
	}
	return time.Since(t0), n, nil
}

// wakeSplit says where a wake went: the restore's read and load (the last checkpoint_restored
// event), the cell and its checkpoint.
func wakeSplit(ctx context.Context, h *benchSrv, id string, a *client.RunResult) string {
	var r carryover.RestoreResult
	for after := int64(0); ; {
		evs, err := h.c.Events(ctx, id, after, 200, "checkpoint_restored")
		if err != nil || len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].SequenceNumber
		_ = json.Unmarshal(evs[len(evs)-1].Payload, &r)
	}
	ck := 0.0
	if a.Checkpoint != nil {
		ck = a.Checkpoint.DurationMS
	}
	lazy := ""
	if r.Timings.LazyBytes > 0 {
		lazy = fmt.Sprintf(", %s filled lazily", fmtBytes(r.Timings.LazyBytes))
	} else if r.Timings.LazyOff != "" {
		lazy = ", eager: " + r.Timings.LazyOff
	}
	return fmt.Sprintf("restore %.0f ms (read %.0f, load %.0f%s), cell %.0f ms, its checkpoint %.0f ms", r.DurationMS, r.Timings.ReadMS,
		r.Timings.LoadMS, lazy, a.DurationMS, ck)
}

//go:embed wake_ds.py
var wakeDSSetup string

const wakeDSProbe = "(df_train.shape, round(float(model.predict(X_te[:1])[0]), 3), len(ax2.collections))"

// benchWakeDS wakes the data-science namespace, beside dill loading the same variables (dumped by
// the session's kernel, names starting with "__" left out as the agent leaves IPython's) into a
// fresh pre-imported kernel, then the same cell.
func benchWakeDS(ctx context.Context, env *benchEnv, h *benchSrv, reps int) (benchRow, error) {
	id, _, err := h.createSession(ctx)
	if err != nil {
		return benchRow{}, err
	}
	defer func() { _ = h.c.DeleteSession(ctx, id) }()
	setup := wakeDSSetup
	if env.Quick { // a fiftieth of the rows: the same code paths
		setup = strings.NewReplacer("n = 100_000", "n = 2_000", "sample(20_000", "sample(400").Replace(setup)
	}
	if _, a, err := h.run(ctx, id, setup); err != nil || a.Status != "ok" {
		return benchRow{}, fmt.Errorf("setup: %v %+v", err, a.Error)
	}
	// The kernel (sandboxed: it sees its workspace only) dumps into its workspace; the file is copied
	// out and removed before the wakes, so no checkpoint carries it.
	dump := filepath.Join(env.Scratch, "wake-ns.dill")
	if _, a, err := h.run(ctx, id, `def __dump():
    import dill
    ns = {k: v for k, v in __carryover__._user_names().items() if not k.startswith("__")}
    with open("wake-ns.dill", "wb") as f:
        dill.dump(ns, f)
__dump(); del __dump`); err != nil || a.Status != "ok" {
		return benchRow{}, fmt.Errorf("dill dump: %v %+v", err, a.Error)
	}
	if err := copyFile(filepath.Join(env.Scratch, "server-wakee2e", "workspaces", id, "wake-ns.dill"), dump); err != nil {
		return benchRow{}, fmt.Errorf("dill dump: %w", err)
	}
	if _, a, err := h.run(ctx, id, "import os; os.remove('wake-ns.dill'); del os"); err != nil || a.Status != "ok" {
		return benchRow{}, fmt.Errorf("after the dill dump: %v %+v", err, a.Error)
	}
	spec, err := kernel.FindSpec("python", "/usr/bin/python3")
	if err != nil {
		return benchRow{}, err
	}
	cp := &persistence.Checkpointer{PreImport: env.Cfg.Persistence.PreImport}
	var wakes, peers []time.Duration
	var last string
	for i := 0; i < reps; i++ {
		d, split, err := wakeRun(ctx, h, id, wakeDSProbe, nil)
		if err != nil {
			return benchRow{}, err
		}
		p, err := dillPeer(ctx, spec, cp, filepath.Join(env.Scratch, fmt.Sprintf("wake-peer%d", i)), dump)
		if err != nil {
			return benchRow{}, err
		}
		wakes, peers = append(wakes, d), append(peers, p)
		last = split
	}
	w, p := percentile(wakes, 50), percentile(peers, 50)
	return benchRow{Name: "wake of a data-science namespace, end to end (median)", Ours: fmtDur(w), Peer: fmtDur(p) + " (dill load + cell)",
		Ratio: fmt.Sprintf("%s; %s", ratio(w, p), verdict(w <= p, "<= dill")),
		Note:  fmt.Sprintf("n=%d; frames, a fitted RandomForest, 2 seaborn figures; peer: fresh kernel with the same pre-imports; last: %s", reps, last)}, nil
}

// dillPeer starts a kernel as the pool does (agent, pre-imports: outside the time), then times dill
// loading the dumped variables into its namespace and the probe cell.
func dillPeer(ctx context.Context, spec *kernel.Spec, cp *persistence.Checkpointer, dir, dump string) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	k, err := kernel.Start(ctx, kernel.Options{Spec: spec, WorkDir: dir, StartupTimeout: benchStartupTimeout})
	if err != nil {
		return 0, err
	}
	defer func() { _ = k.Shutdown(context.Background()) }()
	if err := cp.Install(ctx, k, filepath.Join(dir, "spool"), filepath.Join(dir, "spool")); err != nil {
		return 0, err
	}
	if err := cp.Warm(ctx, k); err != nil {
		return 0, err
	}
	t := time.Now()
	for _, code := range []string{fmt.Sprintf("import dill\nwith open(%q, 'rb') as f:\n    get_ipython().user_ns.update(dill.load(f))", dump), wakeDSProbe} {
		res, err := k.Execute(ctx, code, kernel.ExecOptions{})
		if err != nil {
			return 0, err
		}
		if res.Status != "ok" {
			return 0, fmt.Errorf("dill peer: %s: %s", res.EName, res.EValue)
		}
	}
	return time.Since(t), nil
}

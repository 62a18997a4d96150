package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
)

// The fork fan-out section (issue 40's fan-out row, at a size this shared machine holds): a session
// holding a numpy array is forked into N children in one call (POST .../fork with count), then
// every child answers a first run that reads all of the array, at once. The floor is the same cell
// run N times in the source's live kernel, measured in the same run; the fork call itself is its
// own row. Each child's first run today is a whole kernel plus a whole restore of the array (no
// template, no shared buffers: the rest of issue 40), which is what this row shows.

func benchFanout(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	n, elems, label := 10, 1<<23, "64 MiB" // 10 x 64 MiB restored: within a shared node's memory
	if env.Quick {
		n, elems, label = 3, 1<<17, "1 MiB"
	}
	h, err := startBenchSrv(ctx, env, "fanout", func(c *configs.Config) {
		if c.Capacity.MaxLiveKernels > 0 && c.Capacity.MaxLiveKernels < n+2 {
			c.Capacity.MaxLiveKernels = n + 2 // every child's kernel fits: the row measures forks, not queueing
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, serr := h.stop(); err == nil {
			err = serr
		}
	}()
	if _, err := h.c.CreateSession(ctx, client.CreateRequest{SessionID: "fan"}); err != nil {
		return nil, err
	}
	if _, err := h.c.Run(ctx, "fan", client.RunRequest{Code: fmt.Sprintf("import numpy as np\nbig = np.ones(%d)", elems)}); err != nil {
		return nil, err
	}
	const cell = "float(big.sum())"
	want := fmt.Sprintf("%.1f", float64(elems))
	floorStart := time.Now()
	for range n {
		if err := runWant(ctx, h.c, "fan", cell, want); err != nil {
			return nil, err
		}
	}
	floor := time.Since(floorStart)

	start := time.Now()
	kids, err := h.c.ForkMany(ctx, "fan", client.ForkRequest{SessionID: "kid", Count: n})
	if err != nil {
		return nil, err
	}
	forked := time.Since(start)
	errs := make([]error, len(kids))
	var wg sync.WaitGroup
	for i, k := range kids {
		wg.Go(func() { errs[i] = runWant(ctx, h.c, k.ID, cell, want) })
	}
	wg.Wait()
	all := time.Since(start)
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	rows = append(rows,
		benchRow{Name: fmt.Sprintf("fork into %d children (one call, count=%d)", n, n), Ours: fmtDur(forked),
			Note: "pending children, one checkpoint record each; no chunk written, no kernel claimed"},
		benchRow{Name: fmt.Sprintf("fork of a %s array into %d children, each answering a first run that reads it all", label, n),
			Ours: fmtDur(all), Peer: fmtDur(floor), Ratio: ratio(all, floor),
			Note: fmt.Sprintf("peer (floor): `%s` run %d times in the source's live kernel; each child is a kernel + a full restore today", cell, n)})
	return rows, nil
}

// runWant runs code in session id and checks its result.
func runWant(ctx context.Context, c *client.Client, id, code, want string) error {
	r, err := c.Run(ctx, id, client.RunRequest{Code: code})
	if err != nil {
		return fmt.Errorf("run in %s: %w", id, err)
	}
	if r.Error != nil || r.Result == nil || *r.Result != want {
		return fmt.Errorf("run in %s: %q answered %+v, want %s", id, code, r, want)
	}
	return nil
}

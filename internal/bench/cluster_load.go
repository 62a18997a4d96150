package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Throughput under load: S sessions, each a client running R turns of `1+1` one after the other,
// all sessions at once, on one node and then on two. Each turn also prints its own tag
// (<session>/<turn>) and its answer is checked: a turn that failed or lacks its output is lost, one
// that shows another turn's tag is foreign. On two nodes the sessions are created on alternate
// nodes and each turn goes through the next node in turn (a round-robin balancer without affinity,
// so half the turns are proxied to the owner). Kernel starts are outside the timed part.
// CARRYOVER_BENCH_CLUSTER_SESSIONS and CARRYOVER_BENCH_CLUSTER_RUNS scale it: the default is 50
// sessions x 20 runs, which keeps the section near two minutes on 2 cores (50 kernel starts per
// phase dominate); the 50 x 100 is CARRYOVER_BENCH_CLUSTER_RUNS=100 (about 4 minutes).

type loadResult struct {
	runs, lost, foreign int
	dur                 time.Duration
	firstErr            error
}

func loadSize(env *benchEnv) (sessions, runs int) {
	sessions, runs = 50, 20
	if env.Quick {
		sessions, runs = 2, 2
	}
	if n, err := strconv.Atoi(os.Getenv("CARRYOVER_BENCH_CLUSTER_SESSIONS")); err == nil && n > 0 {
		sessions = n
	}
	if n, err := strconv.Atoi(os.Getenv("CARRYOVER_BENCH_CLUSTER_RUNS")); err == nil && n > 0 {
		runs = n
	}
	return sessions, runs
}

// benchLoad runs the load on nodes and deletes its sessions after.
func benchLoad(ctx context.Context, nodes []*benchSrv, sessions, runs int) (loadResult, error) {
	ids := make([]string, sessions)
	defer func() {
		for i, id := range ids {
			if id != "" {
				_ = nodes[i%len(nodes)].c.DeleteSession(ctx, id)
			}
		}
	}()
	var start errgroup.Group
	start.SetLimit(4)    // 50 kernels starting at once on 2 cores outlast the startup timeout
	for i := range ids { // create and start every kernel first (not timed)
		start.Go(func() error {
			n := nodes[i%len(nodes)]
			id, _, err := n.createSession(ctx)
			if err == nil {
				ids[i] = id
				_, _, err = n.run(ctx, id, "1+1")
			}
			return err
		})
	}
	if err := start.Wait(); err != nil {
		return loadResult{}, fmt.Errorf("starting %d sessions: %w", sessions, err)
	}
	var mu sync.Mutex
	res := loadResult{runs: sessions * runs}
	t0 := time.Now()
	var load errgroup.Group
	for i, id := range ids {
		load.Go(func() error {
			for j := range runs {
				n := nodes[(i+j)%len(nodes)]
				tag := fmt.Sprintf("%s/%d", id, j)
				_, a, err := n.run(ctx, id, fmt.Sprintf("print(%q)\n1+1", tag))
				lost, foreign := false, false
				out := strings.TrimSpace(a.Stdout)
				switch {
				case err != nil:
					lost = true
				case out != tag:
					foreign = strings.Contains(out, "/")
					lost = !foreign
				case a.Result == nil || *a.Result != "2":
					lost = true
				}
				mu.Lock()
				if lost {
					res.lost++
				}
				if foreign {
					res.foreign++
				}
				if (lost || foreign) && res.firstErr == nil {
					res.firstErr = fmt.Errorf("session %s turn %d through %s: err %v, stdout %q", id, j, n.base, err, out)
				}
				mu.Unlock()
			}
			return nil // counted in res
		})
	}
	_ = load.Wait()
	res.dur = time.Since(t0)
	return res, nil
}

// benchThroughput is the load on the first node alone, then on both.
func benchThroughput(ctx context.Context, env *benchEnv, nodes []*benchSrv) ([]benchRow, error) {
	sessions, runs := loadSize(env)
	one, err := benchLoad(ctx, nodes[:1], sessions, runs)
	if err != nil {
		return nil, fmt.Errorf("1 node: %w", err)
	}
	two, err := benchLoad(ctx, nodes, sessions, runs)
	if err != nil {
		return nil, fmt.Errorf("2 nodes: %w", err)
	}
	rate := func(r loadResult) float64 { return float64(r.runs) / r.dur.Seconds() }
	note := fmt.Sprintf("%d sessions x %d runs of `1+1` at once, checkpoint each; lost %d / %d, foreign %d / %d (1 node / 2 nodes); "+
		"2 nodes: round-robin, half the runs proxied; both nodes share this machine's 2 cores", sessions, runs, one.lost, two.lost, one.foreign, two.foreign)
	row := benchRow{
		Name:  "throughput on 2 nodes vs 1 node",
		Ours:  fmt.Sprintf("%.0f runs/s", rate(two)),
		Peer:  fmt.Sprintf("1 node %.0f runs/s", rate(one)),
		Ratio: fmt.Sprintf("%.2fx", rate(two)/rate(one)),
		Note:  note,
	}
	for _, r := range []loadResult{one, two} {
		if r.firstErr != nil {
			return []benchRow{row}, fmt.Errorf("lost or foreign outputs, first: %w", r.firstErr)
		}
	}
	return []benchRow{row}, nil
}

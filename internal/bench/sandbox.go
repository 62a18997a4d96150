package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/kernel/sandbox"
)

// The sandbox section measures what the system-call filter costs: the same sandboxed server twice,
// seccomp on and off, measured alternately (A/B/A/B, so a busy moment of the shared machine hits
// both) for session create -> first result (warm pool) and the 1+1 round trip of a live session.

func benchSandboxSection(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	if os.Geteuid() != 0 || sandbox.Probe("") != nil {
		return []benchRow{{Name: "seccomp filter cost", Note: "skipped: the sandbox needs root and bubblewrap"}}, nil
	}
	nFirst, nRound := 10, 60
	if env.Quick {
		nFirst, nRound = 1, 3
	}
	srv := map[bool]*benchSrv{}
	for i, on := range []bool{false, true} {
		name := "seccomp-" + map[bool]string{false: "off", true: "on"}[on]
		h, err := startBenchSrv(ctx, env, name, func(c *configs.Config) {
			c.Sandbox.Enabled, c.Sandbox.Seccomp = true, on
			c.Sandbox.UIDBase = 260000 + 1000*i
			c.Pool.Size = 2
		})
		if err != nil {
			return rows, err
		}
		defer func() {
			if serr := stopSrv(h, name, &rows); err == nil && serr != nil {
				err = serr
			}
		}()
		srv[on] = h
	}
	first := map[bool][]time.Duration{}
	round := map[bool][]time.Duration{}
	ids := map[bool]string{}
	for i := range nFirst + 1 { // the first one warms the server's code paths and is not counted
		srv[true].settle(3 * time.Second) // the pools refill (a sandboxed kernel start plus the agent)
		for _, on := range []bool{false, true} {
			h := srv[on]
			t0 := time.Now()
			id, _, err := h.createSession(ctx)
			if err != nil {
				return rows, err
			}
			if _, a, err := h.run(ctx, id, "1+1"); err != nil || a.Result == nil || *a.Result != "2" {
				return rows, fmt.Errorf("first run (seccomp %v): %v %v", on, err, a)
			}
			if i > 0 {
				first[on] = append(first[on], time.Since(t0))
			}
			if ids[on] == "" {
				ids[on] = id // kept for the round trips
			} else if err := h.c.DeleteSession(ctx, id); err != nil {
				return rows, err
			}
		}
	}
	for i := range nRound + 5 {
		for _, on := range []bool{false, true} {
			d, a, err := srv[on].run(ctx, ids[on], "1+1")
			if err != nil || a.Result == nil || *a.Result != "2" {
				return rows, fmt.Errorf("1+1 (seccomp %v): %v", on, err)
			}
			if i >= 5 {
				round[on] = append(round[on], d)
			}
		}
	}
	rows = append(rows,
		benchRow{Name: "sandboxed create -> first result, seccomp on (median)", Ours: fmtDur(srvMedian(first[true])),
			Peer: fmtDur(srvMedian(first[false])) + " off", Ratio: ratio(srvMedian(first[true]), srvMedian(first[false])),
			Note: fmt.Sprintf("target: unchanged within noise; n=%d each, measured alternately; sandbox.enabled=true, warm pool of 2", nFirst)},
		benchRow{Name: "sandboxed 1+1 round trip, seccomp on (median)", Ours: fmtDur(srvMedian(round[true])),
			Peer: fmtDur(srvMedian(round[false])) + " off", Ratio: ratio(srvMedian(round[true]), srvMedian(round[false])),
			Note: fmt.Sprintf("target: unchanged within noise; n=%d each, POST /run incl. the turn's checkpoint; p99 %s on / %s off",
				nRound, fmtDur(srvP99(round[true])), fmtDur(srvP99(round[false])))},
	)
	return rows, nil
}

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/servertest"
)

// Failover time: a node that runs in its own process (the carryover binary, started by
// internal/servertest and configured by CARRYOVER_* variables, so it can be SIGKILLed) owns a
// session with a committed turn; it is killed, and a surviving node is asked to run in the session
// until it answers. Beside it: the victim's TTL and the restore time of the same session on the
// survivor (hibernate, then the first run: kernel start + restore + run, the path a claim takes).

const benchFailoverTTL = 3 * time.Second

// startBenchNodeProc starts a node process on dsn and waits until it answers /healthz.
func startBenchNodeProc(env *benchEnv, name, dsn, token string) (*servertest.Process, *client.Client, error) {
	return spawnBenchServer(env, "node-"+name, token, "CARRYOVER_POOL_SIZE=0",
		"CARRYOVER_STORE_DRIVER=postgres", "CARRYOVER_STORE_DSN="+dsn,
		"CARRYOVER_CLUSTER_NODE_ID="+name, "CARRYOVER_CLUSTER_HEARTBEAT_SECONDS=0.5",
		"CARRYOVER_CLUSTER_TTL_SECONDS="+strconv.FormatFloat(benchFailoverTTL.Seconds(), 'f', -1, 64))
}

// spawnBenchServer starts the carryover binary in a process of its own (servertest.Launch: in its
// own process group; the sandbox as startBenchSrv sets it, the default pool growth, configured by
// CARRYOVER_* variables, extra last) under the scratch dir's name/, and waits until it answers
// /healthz. Its own process: it can be SIGKILLed, and its memory is its own. The caller stops it.
func spawnBenchServer(env *benchEnv, name, token string, extra ...string) (*servertest.Process, *client.Client, error) {
	dir := filepath.Join(env.Scratch, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	vars := append([]string{"CARRYOVER_KERNEL_PYTHON=/usr/bin/python3",
		"CARRYOVER_KERNEL_STARTUP_TIMEOUT_SECONDS=" + strconv.Itoa(int(benchStartupTimeout.Seconds())),
		"CARRYOVER_POOL_MAX_SIZE=" + strconv.Itoa(env.Cfg.Pool.MaxSize), // servertest's processes default to 0
		"CARRYOVER_SANDBOX_ENABLED=" + strconv.FormatBool(env.Cfg.Sandbox.Enabled && benchSandboxOK()),
		"CARRYOVER_SANDBOX_UID_BASE=" + strconv.Itoa(nextBenchUIDBase()), "CARRYOVER_SANDBOX_UID_COUNT=10000"}, extra...)
	// The configured pre-imports, as startBenchSrv's servers have them (none in quick mode).
	p, err := servertest.Launch(servertest.Options{Token: token, Env: vars, Dir: dir, PreImport: len(env.Cfg.Persistence.PreImport) > 0})
	if err != nil {
		return nil, nil, fmt.Errorf("server %s: %w", name, err)
	}
	return p, client.New(p.Base, token), nil
}

// benchFailover measures SIGKILL -> first successful run through survivor.
func benchFailover(ctx context.Context, env *benchEnv, dsn string, survivor *benchSrv) ([]benchRow, error) {
	proc, victim, err := startBenchNodeProc(env, "victim", dsn, survivor.token)
	if err != nil {
		return nil, err
	}
	defer proc.Kill9()
	s, err := victim.CreateSession(ctx, client.CreateRequest{})
	if err != nil {
		return nil, fmt.Errorf("create on the victim: %w", err)
	}
	first, err := victim.Run(ctx, s.ID, client.RunRequest{Code: "x = 41\nimport os as _o\nprint(_o.getpid())\ndel _o"})
	if err != nil {
		return nil, fmt.Errorf("run on the victim: %w", err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(first.Stdout)); err == nil {
		defer syscall.Kill(pid, syscall.SIGKILL) // the victim's kernel outlives it (its own process group)
	}
	t0 := time.Now()
	proc.Kill9()
	var res *client.RunResult
	for attempts := 0; ; attempts++ {
		_, res, err = survivor.run(ctx, s.ID, "x + 1")
		if err == nil {
			break
		}
		if client.ErrorCode(err) != "not_owner" || time.Since(t0) > 10*benchFailoverTTL {
			return nil, fmt.Errorf("run on the survivor after the kill (attempt %d): %w", attempts, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	failover := time.Since(t0)
	if res.Result == nil || *res.Result != "42" {
		return nil, fmt.Errorf("after failover x + 1 is %v, want 42 (the committed turn)", res.Result)
	}
	// The failover's kernel came from the survivor's warm pool: let it refill, so the restore
	// beside it starts from the same place.
	survivor.settle(5 * time.Second)
	if _, err := survivor.c.Hibernate(ctx, s.ID); err != nil {
		return nil, fmt.Errorf("hibernate on the survivor: %w", err)
	}
	restore, res, err := survivor.run(ctx, s.ID, "x + 1")
	if err != nil || res.Result == nil || *res.Result != "42" {
		return nil, fmt.Errorf("restore on the survivor: %v %v", err, res.Result)
	}
	_ = survivor.c.DeleteSession(ctx, s.ID)
	floor := benchFailoverTTL + restore
	return []benchRow{{
		Name:  "failover: node SIGKILL -> first successful run on another node",
		Ours:  fmtDur(failover),
		Peer:  fmt.Sprintf("TTL %s + restore %s", fmtDur(benchFailoverTTL), fmtDur(restore)),
		Ratio: ratio(failover, floor),
		Note: "target <= TTL + restore (ratio <= 1); the TTL runs from the victim's last heartbeat (every 0.5 s), so the claim " +
			"comes 2.5-3 s after the kill; the run has the last committed turn; the client retries every 20 ms on 421",
	}}, nil
}

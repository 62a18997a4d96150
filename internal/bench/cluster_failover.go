package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/server"
)

// Failover time: a node that runs in its own process (this binary re-executed with benchNodeEnv,
// configured by CARRYOVER_* variables, so it can be SIGKILLed) owns a session with a committed
// turn; it is killed, and a surviving node is asked to run in the session until it answers. Beside
// it: the victim's TTL and the restore time of the same session on the survivor (hibernate, then
// the first run: kernel start + restore + run, the path a claim takes).

const (
	benchNodeEnv     = "CARRYOVER_BENCH_NODE" // "1": this process is a cluster node of the bench
	benchFailoverTTL = 3 * time.Second
)

func init() {
	if os.Getenv(benchNodeEnv) == "1" {
		os.Exit(runBenchNode())
	}
}

// runBenchNode serves one node until SIGTERM (or until it is killed, which is the point).
func runBenchNode() int {
	cfg, err := configs.Load("", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 2
	}
	srv, err := server.New(context.Background(), cfg, nil, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err == nil {
		err = srv.Listen()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// startBenchNodeProc starts a node process on dsn and waits until it answers /healthz.
func startBenchNodeProc(ctx context.Context, env *benchEnv, name, dsn, token string) (*exec.Cmd, *client.Client, error) {
	return spawnBenchServer(ctx, env, "node-"+name, token, "CARRYOVER_POOL_SIZE=0",
		"CARRYOVER_STORE_DRIVER=postgres", "CARRYOVER_STORE_DSN="+dsn,
		"CARRYOVER_CLUSTER_NODE_ID="+name, "CARRYOVER_CLUSTER_HEARTBEAT_SECONDS=0.5",
		"CARRYOVER_CLUSTER_TTL_SECONDS="+strconv.FormatFloat(benchFailoverTTL.Seconds(), 'f', -1, 64))
}

// spawnBenchServer starts a server in a process of its own (this binary re-executed with
// benchNodeEnv, in its own process group; the sandbox as startBenchSrv sets it, configured by
// CARRYOVER_* variables, extra last) on a data dir named name under the scratch dir, and waits until it answers
// /healthz. Its own process: it can be SIGKILLed, and its memory is its own.
func spawnBenchServer(ctx context.Context, env *benchEnv, name, token string, extra ...string) (*exec.Cmd, *client.Client, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(env.Scratch, name)
	logf, err := os.Create(dir + ".log")
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), benchNodeEnv+"=1", "CARRYOVER_SERVER_ADDR="+addr, "CARRYOVER_DATA_DIR="+dir,
		"CARRYOVER_AUTH_TOKEN="+token, "CARRYOVER_KERNEL_PYTHON=/usr/bin/python3",
		"CARRYOVER_SANDBOX_ENABLED="+strconv.FormatBool(env.Cfg.Sandbox.Enabled && benchSandboxOK()),
		"CARRYOVER_SANDBOX_UID_BASE="+strconv.Itoa(nextBenchUIDBase()), "CARRYOVER_SANDBOX_UID_COUNT=10000")
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	go func() { cmd.Wait(); logf.Close() }()
	c := client.New("http://"+addr, token)
	deadline := time.Now().Add(60 * time.Second)
	for c.Health(ctx) != nil {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, nil, fmt.Errorf("server %s not healthy after 60 s (log %s.log)", name, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cmd, c, nil
}

// benchFailover measures SIGKILL -> first successful run through survivor.
func benchFailover(ctx context.Context, env *benchEnv, dsn string, survivor *benchSrv) ([]benchRow, error) {
	cmd, victim, err := startBenchNodeProc(ctx, env, "victim", dsn, survivor.token)
	if err != nil {
		return nil, err
	}
	defer cmd.Process.Kill()
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
	cmd.Process.Kill()
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
	time.Sleep(5 * time.Second)
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

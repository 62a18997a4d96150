package chaos

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/internal/faultproxy"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/internal/servertest"
)

// clusterKinds are the cluster's faults beyond the single node's: its store's (PostgreSQL stopped
// and started again, every connection to it killed) and its object store's (S3 refusing every
// connection, or holding every byte, for a while).
var clusterKinds = []string{"pg-restart", "pg-kill-conns", "s3-outage", "s3-slow"}

// cluster is the harness's second topology: two nodes on one PostgreSQL and one S3 gateway (the S3
// traffic through a fault proxy), a load balancer in front of the nodes.
type cluster struct {
	pg    *pgtest.Server
	dsn   string
	s3    *faultproxy.Proxy
	nodes []*servertest.Process
	lb    *balancer
}

// startCluster starts PostgreSQL, the S3 gateway and the proxy before it, the nodes and the
// balancer, each stopped when the test ends.
func startCluster(t *testing.T, nodes, pool int, env []string) *cluster {
	pg, err := pgtest.Init("")
	if err == nil {
		err = pg.Start()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Remove() })
	cl := &cluster{pg: pg}
	if cl.dsn, err = pg.NewDB(); err != nil {
		t.Fatal(err)
	}
	gw, err := s3test.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	if cl.s3, err = faultproxy.Start(gw.Addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.s3.Close)
	env = append(slices.Clone(env), "CARRYOVER_STORE_DRIVER=postgres", "CARRYOVER_STORE_DSN="+cl.dsn,
		"CARRYOVER_CLUSTER_HEARTBEAT_SECONDS=0.3", "CARRYOVER_CLUSTER_TTL_SECONDS=3",
		"CARRYOVER_CHUNKS_S3_ENDPOINT=http://"+cl.s3.Addr(), "CARRYOVER_CHUNKS_S3_BUCKET="+s3test.NewBucket(),
		"CARRYOVER_CHUNKS_S3_ACCESS_KEY="+s3test.AccessKey, "CARRYOVER_CHUNKS_S3_SECRET_KEY="+s3test.SecretKey)
	var addrs []string
	for i := range nodes {
		p := servertest.StartProcess(t, servertest.Options{Token: "chaos", Flags: []string{"--pool.size", strconv.Itoa(pool)},
			Env: append(slices.Clone(env), "CARRYOVER_CLUSTER_NODE_ID="+string(rune('a'+i)))})
		cl.nodes = append(cl.nodes, p)
		addrs = append(addrs, strings.TrimPrefix(p.Base, "http://"))
	}
	if cl.lb, err = startBalancer(addrs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.lb.close)
	return cl
}

// TestChaosCluster is TestChaos on the second topology: two nodes on PostgreSQL + S3 behind a load
// balancer, with the store faults besides the single node's (a kill -9 or SIGSTOP of a node picks
// one of the two). The same model and check: nothing answered is lost, any difference is named.
func TestChaosCluster(t *testing.T) {
	t.Parallel()
	faults := envInt("CARRYOVER_CHAOS_FAULTS", 1)
	seed := uint64(envInt("CARRYOVER_CHAOS_SEED", 1))
	env, sandbox := sandboxEnv()
	t.Logf("seed %d, %d faults, sandbox %v", seed, faults, sandbox)
	cl := startCluster(t, 2, 1, env)
	h := newHarness(t, "two nodes on PostgreSQL + S3", seed, cl.lb.addr(), cl.nodes)
	h.kinds = append(slices.Clone(faultKinds), clusterKinds...)
	if sandbox {
		h.kinds = append(h.kinds, "oom-kernel")
	}
	h.storeOK = func() bool { return pgOK(t, cl.dsn) }
	h.inject2 = func(kind string, _ *model) bool { return cl.inject(h, kind) }
	h.run(faults, runners(t, h.c, "http://"+h.proxy.Addr(), "chaos"))
}

// inject makes one of the store faults and its recovery; false for a kind that is not one.
func (cl *cluster) inject(h *harness, kind string) bool {
	pause := time.Duration(500+h.rng.IntN(2500)) * time.Millisecond
	switch kind {
	case "pg-restart":
		cl.pg.Stop()
		time.Sleep(pause)
		if err := cl.pg.Start(); err != nil {
			h.t.Fatalf("PostgreSQL did not start again: %v", err)
		}
	case "pg-kill-conns":
		db, err := sql.Open("pgx", cl.pg.DSN("postgres"))
		if err != nil {
			h.t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName(cl.dsn)); err != nil {
			h.t.Logf("pg_terminate_backend: %v", err)
		}
	case "s3-outage", "s3-slow":
		mode := faultproxy.Drop
		if kind == "s3-slow" {
			mode = faultproxy.Stall
		}
		cl.s3.Set(mode)
		time.Sleep(pause)
		cl.s3.Set(faultproxy.Pass)
	default:
		return false
	}
	return true
}

// dbName is the database of a pgtest DSN (its path).
func dbName(dsn string) string {
	s := dsn[strings.LastIndexByte(dsn, '/')+1:]
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i]
	}
	return s
}

// pgOK reads every table of the cluster's database in full: a damaged page or index fails the scan.
func pgOK(t *testing.T, dsn string) bool {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Logf("pg: %v", err)
		return false
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Logf("pg: listing tables: %v", err)
		return false
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	for _, tb := range tables {
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM "`+tb+`"`).Scan(&n); err != nil {
			t.Logf("pg: reading %s: %v", tb, err)
			return false
		}
	}
	return len(tables) > 0
}

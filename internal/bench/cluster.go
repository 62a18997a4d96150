package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/freeport"
	"github.com/carryover/carryover/internal/pgtest"
)

// The cluster section: two nodes on one PostgreSQL (Debian's, started in the scratch dir like the
// tests do). The figure is what routing costs: `1+1` through a node that does not own the session
// (proxied to the owner) beside the same run sent to the owner, interleaved in one loop.

func benchClusterSection(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	pg, err := benchPostgres("bench")
	if err != nil {
		return nil, err
	}
	defer pg.Remove()
	var nodes []*benchSrv
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for _, name := range []string{"n1", "n2"} {
		n, err := startClusterNode(ctx, env, name, pg.DSN("bench"))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	rows, err := proxiedRows(ctx, env, nodes[0], nodes[1])
	if err != nil {
		return rows, err
	}
	more, err := benchThroughput(ctx, env, nodes) // cluster_load.go
	rows = append(rows, more...)
	if err != nil {
		return rows, err
	}
	more, err = benchFailover(ctx, env, pg.DSN("bench"), nodes[1]) // cluster_failover.go
	return append(rows, more...), err
}

// benchPostgres starts Debian's PostgreSQL (not under the scratch dir: it runs as nobody when we
// are root) with an empty database db; the caller removes it.
func benchPostgres(db string) (*pgtest.Server, error) {
	pg, err := pgtest.Init("")
	if err != nil {
		return nil, err
	}
	if err := pg.Start(); err != nil {
		pg.Remove()
		return nil, err
	}
	admin, err := sql.Open("pgx", pg.DSN("postgres"))
	if err == nil {
		_, err = admin.Exec(`CREATE DATABASE ` + db)
		admin.Close()
	}
	if err != nil {
		pg.Remove()
		return nil, err
	}
	return pg, nil
}

// startClusterNode starts node name of the cluster on dsn, in this process, on an address it knows
// before it listens (it advertises it to the others).
func startClusterNode(ctx context.Context, env *benchEnv, name, dsn string) (*benchSrv, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startBenchSrv(ctx, env, "cluster-"+name, func(c *configs.Config) {
		c.Server.Addr = addr
		c.Auth.Token = "bench-cluster-token" // one token for the cluster
		c.Store.Driver, c.Store.DSN = "postgres", dsn
		c.Cluster.NodeID = name
		c.Pool.Size = 1
	})
}

// proxiedRows times `1+1` through the node that does not own the session beside the same run sent
// to the owner, interleaved.
func proxiedRows(ctx context.Context, env *benchEnv, owner, other *benchSrv) ([]benchRow, error) {
	id, _, err := owner.createSession(ctx)
	if err != nil {
		return nil, err
	}
	iters, warm := 200, 10 // the first runs start the kernel and warm the connections
	if env.Quick {
		iters, warm = 4, 2
	}
	var direct, proxied []time.Duration
	for i := range iters + warm {
		d1, _, err := owner.run(ctx, id, "1+1")
		if err != nil {
			return nil, fmt.Errorf("run on the owner: %w", err)
		}
		d2, _, err := other.run(ctx, id, "1+1")
		if err != nil {
			return nil, fmt.Errorf("run through the other node: %w", err)
		}
		if i >= warm {
			direct, proxied = append(direct, d1), append(proxied, d2)
		}
	}
	sort.Slice(direct, func(i, j int) bool { return direct[i] < direct[j] })
	sort.Slice(proxied, func(i, j int) bool { return proxied[i] < proxied[j] })
	md, mp := percentile(direct, 50), percentile(proxied, 50)
	rows := []benchRow{{
		Name:  "`1+1` through a non-owner node, proxied (median)",
		Ours:  fmtDur(mp),
		Peer:  "owner " + fmtDur(md),
		Ratio: ratio(mp, md),
		Note:  fmt.Sprintf("added %s (target < 1 ms); %d runs each, checkpoint included, PostgreSQL fsync=off", fmtDur(mp-md), len(direct)),
	}}
	return rows, nil
}

// freeAddr is a free loopback address: a cluster node must know its own before it listens, since
// it advertises it to the others.
func freeAddr() (string, error) { return freeport.Addr() }

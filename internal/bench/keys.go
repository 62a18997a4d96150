package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/pgtest"
)

// The keys section: what an API key costs a request beside a config token (compared in memory), on
// SQLite and on PostgreSQL. A node caches a verified key for 500 ms (revocation reaches every node
// within that), so most requests pay no store lookup; the lookup itself is measured too, as what
// every request would pay without the cache.

func benchKeysSection(ctx context.Context, env *benchEnv) ([]benchRow, error) {
	n := 2000
	if env.Quick {
		n = 10
	}
	lite, err := startBenchSrv(ctx, env, "keys-sqlite", func(c *configs.Config) { c.Pool.Size = 0 })
	if err != nil {
		return nil, err
	}
	defer lite.stop()
	rows, err := benchKeysOn(ctx, lite, "SQLite", n)
	if err != nil {
		return rows, err
	}
	pg, err := pgtest.Init("")
	if err != nil {
		return rows, err
	}
	defer pg.Remove()
	if err := pg.Start(); err != nil {
		return rows, err
	}
	admin, err := sql.Open("pgx", pg.DSN("postgres"))
	if err != nil {
		return rows, err
	}
	_, err = admin.Exec(`CREATE DATABASE benchkeys`)
	admin.Close()
	if err != nil {
		return rows, err
	}
	addr, err := freeAddr()
	if err != nil {
		return rows, err
	}
	node, err := startBenchSrv(ctx, env, "keys-pg", func(c *configs.Config) {
		c.Server.Addr = addr
		c.Store.Driver, c.Store.DSN = "postgres", pg.DSN("benchkeys")
		c.Cluster.NodeID = "k1"
		c.Pool.Size = 0
	})
	if err != nil {
		return rows, err
	}
	defer node.stop()
	more, err := benchKeysOn(ctx, node, "PostgreSQL", n)
	return append(rows, more...), err
}

// benchKeysOn measures GET /api/sessions/{id} with the config token and with an API key (median of
// n each, interleaved so both see the same load), and the store's KeyByHash alone.
func benchKeysOn(ctx context.Context, h *benchSrv, store string, n int) ([]benchRow, error) {
	id, _, err := h.createSession(ctx)
	if err != nil {
		return nil, err
	}
	k, err := h.c.CreateKey(ctx, client.CreateKeyRequest{Tenant: carryover.DefaultTenant, Scope: client.ScopeRead})
	if err != nil {
		return nil, err
	}
	keyed := client.New(h.base, k.Secret, client.WithHTTPClient(h.hc))
	var tok, key, lookup []time.Duration
	for i := range n {
		for j, c := range []*client.Client{h.c, keyed} {
			if i%2 == 1 {
				c = []*client.Client{keyed, h.c}[j]
			}
			t0 := time.Now()
			if _, err := c.GetSession(ctx, id); err != nil {
				return nil, err
			}
			if c == h.c {
				tok = append(tok, time.Since(t0))
			} else {
				key = append(key, time.Since(t0))
			}
		}
		t0 := time.Now()
		if _, err := h.srv.Store.KeyByHash(ctx, carryover.KeyHash(k.Secret)); err != nil {
			return nil, err
		}
		lookup = append(lookup, time.Since(t0))
	}
	pt, pk, pl := percentile(tok, 50), percentile(key, 50), percentile(lookup, 50)
	return []benchRow{
		{Name: fmt.Sprintf("GET session with an API key, p50 (%s)", store), Ours: fmtDur(pk), Peer: fmtDur(pt), Ratio: ratio(pk, pt),
			Note: fmt.Sprintf("peer: the config token; p99 %s vs %s; key cached 500 ms", fmtDur(percentile(key, 99)), fmtDur(percentile(tok, 99)))},
		{Name: fmt.Sprintf("key lookup in the store, uncached, p50 (%s)", store), Ours: fmtDur(pl), Peer: fmtDur(pt), Ratio: ratio(pl, pt),
			Note: "what each request would add without the cache; peer: a whole request with the config token"},
	}, nil
}

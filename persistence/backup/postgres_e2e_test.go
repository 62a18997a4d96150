package backup_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/internal/servertest"
)

// The PostgreSQL recipe of docs/operations.md, tested: a base backup of a cluster's database taken
// while a node runs (pg_basebackup, as pgtest's Replica makes it, then promoted: a restored copy as
// of the backup), a node started on the copy with the same bucket restores a session whose large
// chunks are in S3, at the turn before the backup, not the one after.
func TestPostgresBaseBackupRestores(t *testing.T) {
	t.Parallel()
	gw, err := s3test.Start(t.TempDir())
	if err != nil {
		t.Fatalf("versitygw (make tools builds it; make test runs make tools first): %v", err)
	}
	t.Cleanup(gw.Stop)
	primary, err := pgtest.Init("")
	if err != nil {
		t.Fatalf("PostgreSQL (make deps installs it): %v", err)
	}
	t.Cleanup(func() { primary.Remove() })
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	bucket := s3test.NewBucket()
	nodeEnv := func(id, dsn string) []string {
		return []string{"CARRYOVER_SANDBOX_ENABLED=false", "CARRYOVER_STORE_DRIVER=postgres", "CARRYOVER_STORE_DSN=" + dsn,
			"CARRYOVER_CLUSTER_NODE_ID=" + id, "CARRYOVER_CLUSTER_HEARTBEAT_SECONDS=0.3", "CARRYOVER_CLUSTER_TTL_SECONDS=1.5",
			"CARRYOVER_CHUNKS_S3_ENDPOINT=" + gw.Endpoint, "CARRYOVER_CHUNKS_S3_BUCKET=" + bucket,
			"CARRYOVER_CHUNKS_S3_ACCESS_KEY=" + s3test.AccessKey, "CARRYOVER_CHUNKS_S3_SECRET_KEY=" + s3test.SecretKey}
	}
	a := servertest.StartProcess(t, servertest.Options{Token: token, Flags: []string{"--pool.size", "0"},
		Env: nodeEnv("a", primary.DSN("postgres"))})
	ca := client.New(a.Base, token)
	id := servertest.ID(t)
	if _, err := ca.CreateSession(t.Context(), client.CreateRequest{SessionID: id}); err != nil {
		t.Fatal(err)
	}
	run := func(c *client.Client, code string) string {
		t.Helper()
		res, err := c.Run(t.Context(), id, client.RunRequest{Code: code})
		if err != nil || res.Status != "ok" || res.CheckpointError != "" {
			t.Fatalf("run %q: %v %+v", code, err, res)
		}
		return strings.TrimSpace(res.Stdout)
	}
	run(ca, "import os, hashlib\nbig = os.urandom(600000)\nopen('data.bin', 'wb').write(os.urandom(300000))\nturn = 1")
	digest := run(ca, "print(hashlib.sha256(big + open('data.bin', 'rb').read()).hexdigest())")

	// The base backup, while node a runs; promoted at once, it is the database as of the backup.
	copyDB, err := primary.Replica()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { copyDB.Remove() })
	db, err := sql.Open("pgx", copyDB.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "SELECT pg_promote(true, 60)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	run(ca, "big = os.urandom(600000)\nturn = 2") // after the backup: not in the copy
	a.Stop()
	primary.Stop() // the original database is gone

	b := servertest.StartProcess(t, servertest.Options{Token: token, Flags: []string{"--pool.size", "0"},
		Env: nodeEnv("b", copyDB.DSN("postgres"))})
	got := run(client.New(b.Base, token), "print(turn, hashlib.sha256(big + open('data.bin', 'rb').read()).hexdigest())")
	if got != "1 "+digest {
		t.Fatalf("on the restored copy: %q, want turn 1 with digest %s", got, digest)
	}
}

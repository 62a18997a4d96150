package clustertest

import (
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/persistence/format"
)

// latestFormat is the "v" of the manifest of session id's newest checkpoint, read from PostgreSQL.
func latestFormat(t *testing.T, db *sql.DB, id string) int {
	t.Helper()
	var doc string
	if err := db.QueryRowContext(t.Context(), `SELECT manifest FROM checkpoints WHERE session_id = $1 ORDER BY pos DESC LIMIT 1`, id).Scan(&doc); err != nil {
		t.Fatalf("newest checkpoint of %s: %v", id, err)
	}
	var m struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("manifest of %s: %v", id, err)
	}
	return m.V
}

// storeFormat is the store's recorded format (store_meta), 0 when none is.
func storeFormat(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v sql.NullInt64
	if err := db.QueryRowContext(t.Context(), `SELECT max(value) FROM store_meta WHERE name = 'format'`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return int(v.Int64)
}

// TestRollingUpgradeSwitchesFormat: a rolling upgrade into a build that reads one checkpoint format
// more, on PostgreSQL + S3. The new build is this binary with cluster.test_max_format raised by one
// (the next format is, today, format 1's content under the next number: the subject is the
// switch, not a new layout). While an old node lives the new one stamps the old format on what it
// checkpoints, and the old node wakes that session (its large chunk from S3); once the last old
// node has left the cluster switches, records it, and stamps the new format, reading the old one
// still; an old build is then refused with both formats named.
func TestRollingUpgradeSwitchesFormat(t *testing.T) {
	gw := s3test.Shared(t)
	dsn, bucket := pgtest.NewDB(t), s3test.NewBucket()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	oldF, newF := format.Newest, format.Newest+1
	env := s3Env(gw.Endpoint, bucket)
	nextBuild := append(env, "CARRYOVER_CLUSTER_TEST_MAX_FORMAT="+strconv.Itoa(newF))
	old := startNode(t, "old", dsn, env...)
	nw := startNode(t, "new", dsn, nextBuild...)

	if _, err := nw.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "up"}); err != nil {
		t.Fatal(err)
	}
	run(t, nw, "up", "import os\nblob = os.urandom(300_000)\nx = 1\nopen('f.txt', 'w').write('kept')")
	if v := latestFormat(t, db, "up"); v != oldF {
		t.Fatalf("the new node beside an old one wrote format %d, want %d", v, oldF)
	}
	if n := countObjects(t, gw.Endpoint, bucket); n == 0 {
		t.Fatal("no chunk in S3: the old node's wake would not read the object store")
	}
	check := func(n *node, want int) {
		t.Helper()
		out := run(t, n, "up", "x += 1\nprint(x, len(blob), open('f.txt').read())").Stdout
		if got, w := strings.TrimSpace(out), strconv.Itoa(want)+" 300000 kept"; got != w {
			t.Fatalf("on %s: %q, want %q", n.name, got, w)
		}
	}
	nw.term() // drains: the session is released
	check(old, 2)
	if v := latestFormat(t, db, "up"); v != oldF {
		t.Fatalf("the old node wrote format %d, want %d", v, oldF)
	}
	if f := storeFormat(t, db); f != oldF {
		t.Fatalf("the store records format %d while an old node lives, want %d", f, oldF)
	}

	nw.restart() // still beside the old node
	old.term()   // the last old node leaves; its row expires after the TTL
	eventually(t, 4*testTTL, "the switch to format "+strconv.Itoa(newF), func() bool { return storeFormat(t, db) == newF })
	check(nw, 3) // restores the old node's format-1 checkpoint, writes the new format
	if v := latestFormat(t, db, "up"); v != newF {
		t.Fatalf("after the switch the new node wrote format %d, want %d", v, newF)
	}

	// An old build is refused, naming both formats, and exits.
	again, err := launchNode(t, "old", dsn, env...) // fails once the process exits, or after 60 s
	if err == nil {
		t.Fatalf("an old node on a store in format %d is serving", newF)
	}
	select {
	case <-again.p.Exited():
	default:
		t.Fatalf("an old node on a store in format %d did not exit: %v", newF, err)
	}
	for _, want := range []string{"holds checkpoint format " + strconv.Itoa(newF), "reads formats up to " + strconv.Itoa(oldF)} {
		if !strings.Contains(again.log(), want) {
			t.Fatalf("an old node on a store in format %d: log lacks %q:\n%s", newF, want, again.log())
		}
	}
	check(nw, 4)
}

// TestOldNodeRefusedAtHeartbeatExits: an old node paused past the TTL (the last old node, so the
// cluster switches to the new format while it sleeps) is refused at its next heartbeat and exits
// non-zero, naming both formats; it used to stay up, fenced, heartbeating for ever, so nothing told
// its supervisor to replace it.
func TestOldNodeRefusedAtHeartbeatExits(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	oldF, newF := format.Newest, format.Newest+1
	old := startNode(t, "old", dsn)
	startNode(t, "new", dsn, "CARRYOVER_CLUSTER_TEST_MAX_FORMAT="+strconv.Itoa(newF))
	if f := storeFormat(t, db); f != oldF {
		t.Fatalf("the store records format %d beside an old node, want %d", f, oldF)
	}
	old.pause()
	eventually(t, 4*testTTL, "the switch to format "+strconv.Itoa(newF), func() bool { return storeFormat(t, db) == newF })
	old.resume()
	select {
	case <-old.p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("the old node refused at its heartbeat did not exit:\n%s", old.log())
	}
	if code := old.p.ExitCode(); code == 0 {
		t.Errorf("the refused node exited 0, want non-zero")
	}
	for _, want := range []string{"refused by the cluster", "holds checkpoint format " + strconv.Itoa(newF), "reads formats up to " + strconv.Itoa(oldF)} {
		if !strings.Contains(old.log(), want) {
			t.Errorf("the refused node's log lacks %q:\n%s", want, old.log())
		}
	}
}

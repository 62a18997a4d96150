package clustertest

import (
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/faultproxy"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/internal/s3test"
	"github.com/carryover/carryover/persistence/s3"
)

// s3Env configures a node's object store at endpoint with a fresh bucket.
func s3Env(endpoint, bucket string) []string {
	return []string{"CARRYOVER_CHUNKS_S3_ENDPOINT=" + endpoint, "CARRYOVER_CHUNKS_S3_BUCKET=" + bucket,
		"CARRYOVER_CHUNKS_S3_ACCESS_KEY=" + s3test.AccessKey, "CARRYOVER_CHUNKS_S3_SECRET_KEY=" + s3test.SecretKey}
}

// TestObjectStoreDownDuringCheckpoint (scenario 5, end to end): a node keeps large chunks in a real
// S3 server reached through a fault-injecting proxy. With the store down, a run still answers 200 but
// with checkpoint_error (the turn is not saved, and says so); after the node dies, another node that
// reaches the store directly restores the previous checkpoint whole.
func TestObjectStoreDownDuringCheckpoint(t *testing.T) {
	gw := s3test.Shared(t)
	proxy, err := faultproxy.Start(gw.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	dsn, bucket := pgtest.NewDB(t), s3test.NewBucket()
	a := startNode(t, "a", dsn, s3Env("http://"+proxy.Addr(), bucket)...)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "obj"}); err != nil {
		t.Fatal(err)
	}
	r := run(t, a, "obj", "import os, hashlib\nbig = os.urandom(600000)\nopen('data.bin', 'wb').write(os.urandom(300000))\nturn = 1")
	if r.CheckpointError != "" {
		t.Fatalf("first checkpoint failed: %s", r.CheckpointError)
	}
	if n := countObjects(t, gw.Endpoint, bucket); n < 2 {
		t.Fatalf("%d objects in the bucket after a checkpoint of 900 kB of random data, want the large chunks there", n)
	}
	digest := strings.TrimSpace(run(t, a, "obj", "print(hashlib.sha256(big + open('data.bin', 'rb').read()).hexdigest())").Stdout)

	proxy.Set(faultproxy.Drop)
	r = run(t, a, "obj", "big = os.urandom(700000)\nturn = 2")
	if r.CheckpointError == "" {
		t.Fatal("a run whose checkpoint could not reach the object store answered without checkpoint_error")
	}
	types := eventTypes(t, a, "obj")
	if !contains(types, "checkpoint_failed") {
		t.Fatalf("no checkpoint_failed event: %v", types)
	}
	proxy.Set(faultproxy.Pass)
	a.kill()

	b := startNode(t, "b", dsn, s3Env(gw.Endpoint, bucket)...)
	out := run(t, b, "obj", "print(turn, hashlib.sha256(big + open('data.bin', 'rb').read()).hexdigest())")
	if got := strings.TrimSpace(out.Stdout); got != "1 "+digest {
		t.Fatalf("restored %q, want the first turn's state \"1 %s\"", got, digest)
	}
	gapless(t, b, "obj")
}

// countObjects counts the objects of a bucket, read directly from the gateway.
func countObjects(t *testing.T, endpoint, bucket string) int {
	t.Helper()
	b, err := s3.Open(t.Context(), s3.Options{Endpoint: endpoint, Bucket: bucket, AccessKey: s3test.AccessKey,
		SecretKey: s3test.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := b.List(t.Context(), "", func(string, time.Time) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func eventTypes(t *testing.T, n *node, id string) []string {
	t.Helper()
	evs, err := n.c.Events(t.Context(), id, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.EventType)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/faultproxy"
	"github.com/carryover/carryover/internal/pgtest"
	"github.com/carryover/carryover/persistence/postgres"
)

// kernelPID is the pid of the session's kernel on the node that serves it.
func kernelPID(t *testing.T, n *node, id string) int {
	t.Helper()
	out := strings.TrimSpace(run(t, n, id, "import os as _o\nprint(_o.getpid())\ndel _o").Stdout)
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("kernel pid %q", out)
	}
	return pid
}

// ownerOf asks a node's API which node serves the session, by sending a request with the hop
// header: a node that does not own the session answers 421 naming the owner instead of proxying.
func hopStatus(t *testing.T, n *node, id string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.base+"/api/sessions/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("X-Carryover-Hop", "test")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// ownerNodeOf is the owner_node of the session JSON that n answers.
func ownerNodeOf(t *testing.T, n *node, id string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", n.base+"/api/sessions/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Session struct {
			OwnerNode *string `json:"owner_node"`
		} `json:"session"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Session.OwnerNode == nil {
		t.Fatalf("GET session through %s: %d, owner_node missing (%v)", n.name, res.StatusCode, err)
	}
	return *body.Session.OwnerNode
}

// TestNodeKilled (scenario 1): two nodes; a session created on A is also served through B (proxied
// to A). A is SIGKILLed mid-life; through B, the session answers 421 until A's TTL ran out, then B
// claims it and restores the last committed turn. The event log stays gapless, and the turn that
// was running when A died never answered 200.
func TestNodeKilled(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "k1"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "k1", "x = 1")
	if out := run(t, b, "k1", "x += 1\nprint(x)").Stdout; strings.TrimSpace(out) != "2" {
		t.Fatalf("through b (proxied to a): %q", out)
	}
	if code := hopStatus(t, b, "k1"); code != http.StatusMisdirectedRequest {
		t.Fatalf("b with a hop header answered %d for a session a owns, want 421", code)
	}
	if o := ownerNodeOf(t, b, "k1"); o != "a" {
		t.Fatalf("owner_node through b: %q, want a", o)
	}
	lost := make(chan error, 1)
	go func() {
		// No retries: this attempt's own answer is the subject (a retry would wait out a's death).
		once := client.New(a.base, testToken, client.WithRetry(client.RetryPolicy{MaxAttempts: 1}))
		_, err := once.Run(context.Background(), "k1", client.RunRequest{Code: "import time\ntime.sleep(60)\nx = 'lost'"})
		lost <- err
	}()
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	a.kill()
	if err := <-lost; err == nil {
		t.Fatal("the run in flight on the killed node answered 200")
	}
	// Once a's TTL ran out nobody owns the session; a request without a valid token must not move it.
	st, err := postgres.Open(t.Context(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var o carryover.Owner
	eventually(t, 4*testTTL, "a's ownership expired", func() bool {
		o, err = st.Owner(t.Context(), "k1")
		return err == nil && o.Node == ""
	})
	res, err := http.Post(b.base+"/api/sessions/k1/run", "application/json", strings.NewReader(`{"code":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if o2, _ := st.Owner(t.Context(), "k1"); res.StatusCode != http.StatusUnauthorized || o2.Epoch != o.Epoch {
		t.Fatalf("an anonymous request answered %d and moved the session (epoch %d -> %d)", res.StatusCode, o.Epoch, o2.Epoch)
	}
	if out := run(t, b, "k1", "print(x)").Stdout; strings.TrimSpace(out) != "2" {
		t.Fatalf("after a's death, through b: %q, want the last committed turn's 2", out)
	}
	t.Logf("failover: first successful run on b %v after a's SIGKILL (TTL %v)", time.Since(killed).Round(time.Millisecond), testTTL)
	if o := ownerNodeOf(t, b, "k1"); o != "b" {
		t.Fatalf("owner_node after b claimed: %q, want b", o)
	}
	gapless(t, b, "k1")
}

// TestSplitBrain (scenario 2): A is paused (SIGSTOP) past the TTL; B claims the session and serves
// it. When A resumes, it has fenced itself: its kernel is killed, it answers a hop with 421, and the
// run that was in flight on A when it paused did not land on the session B serves.
func TestSplitBrain(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "sb"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "sb", "x = 'before'")
	pid := kernelPID(t, a, "sb")
	inFlight := make(chan error, 1)
	go func() {
		_, err := a.c.Run(context.Background(), "sb", client.RunRequest{Code: "import time\ntime.sleep(1)\nx = 'stale'"})
		inFlight <- err
	}()
	time.Sleep(300 * time.Millisecond)
	a.pause()
	if out := run(t, b, "sb", "print(x)").Stdout; strings.TrimSpace(out) != "before" {
		t.Fatalf("b after claiming: %q", out)
	}
	a.resume()
	eventually(t, 2*testTTL, "a's kernel killed after a resumed", func() bool { return !alive(pid) })
	if err := <-inFlight; err == nil {
		t.Fatal("the run in flight on the paused node answered 200 after another node took the session over")
	}
	if code := hopStatus(t, a, "sb"); code != http.StatusMisdirectedRequest {
		t.Fatalf("a answered %d to a hop for a session b owns, want 421", code)
	}
	if out := run(t, a, "sb", "print(x)").Stdout; strings.TrimSpace(out) != "before" {
		t.Fatalf("through a (proxied to b): %q, want 'before'", out)
	}
	gapless(t, b, "sb")
}

// TestDatabaseUnreachable (scenario 4): a node whose connections to PostgreSQL are cut stops
// serving its sessions (kills their kernels) before its TTL ends, so by the time another node may
// claim them it has stopped writing.
func TestDatabaseUnreachable(t *testing.T) {
	pg := pgtest.Shared(t)
	dsn := pgtest.NewDB(t)
	proxy, err := faultproxy.Start(fmt.Sprintf("127.0.0.1:%d", pg.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := strings.Replace(dsn, fmt.Sprintf("127.0.0.1:%d", pg.Port), proxy.Addr(), 1)
	a := startNode(t, "a", viaProxy)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "db"}); err != nil {
		t.Fatal(err)
	}
	pid := kernelPID(t, a, "db")
	cut := time.Now()
	proxy.Set(faultproxy.Drop)
	eventually(t, testTTL, "the node stopped its session's kernel before its TTL ended", func() bool { return !alive(pid) })
	t.Logf("kernel stopped %v after the database was cut (TTL %v)", time.Since(cut).Round(time.Millisecond), testTTL)
	proxy.Set(faultproxy.Pass)
	b := startNode(t, "b", dsn)
	if out := run(t, b, "db", "print(1 + 1)").Stdout; strings.TrimSpace(out) != "2" {
		t.Fatalf("b: %q", out)
	}
}

// TestDrain (scenario 8): SIGTERM drains a node: its sessions are released when it exits, so
// another node serves them on the first request, with no 421 while a TTL (here a long one) runs out.
func TestDrain(t *testing.T) {
	dsn := pgtest.NewDB(t)
	long := "CARRYOVER_CLUSTER_TTL_SECONDS=600"
	a, b := startNode(t, "a", dsn, long), startNode(t, "b", dsn, long)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "dr"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "dr", "x = 'kept'")
	a.term()
	start := time.Now()
	r, err := b.c.Run(t.Context(), "dr", client.RunRequest{Code: "print(x)"})
	if err != nil {
		t.Fatalf("first run on b after a drained: %v (it must not wait for a's TTL)", err)
	}
	if strings.TrimSpace(r.Stdout) != "kept" {
		t.Fatalf("b: %q", r.Stdout)
	}
	t.Logf("served by b %v after a exited (claim + restore)", time.Since(start).Round(time.Millisecond))
	gapless(t, b, "dr")
}

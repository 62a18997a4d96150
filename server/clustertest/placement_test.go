package clustertest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// placementEnv makes a node hold one live kernel, queue a turn 1 s, and stop within 1 s.
var placementEnv = []string{"CARRYOVER_CAPACITY_MAX_LIVE_KERNELS=1", "CARRYOVER_CAPACITY_QUEUE_SECONDS=1",
	"CARRYOVER_SERVER_SHUTDOWN_GRACE_SECONDS=1"}

// rawPost sends a POST with the test token and no retries, and returns the status, the Retry-After
// header and the API error's code, reason and message.
func rawPost(t *testing.T, n *node, path, body string) (int, string, string, string, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", n.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	json.NewDecoder(res.Body).Decode(&e)
	reason, _ := e.Error.Details["reason"].(string)
	return res.StatusCode, res.Header.Get("Retry-After"), e.Error.Code, reason, e.Error.Message
}

// releasedSession makes session id on node n, runs code in it, and leaves it hibernated with nobody
// serving it: n drains (its sessions are released) and starts again.
func releasedSession(t *testing.T, n *node, code string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := n.c.CreateSession(t.Context(), client.CreateRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
		run(t, n, id, code)
	}
	n.term()
	n.restart()
}

// TestPlacement: node a holds one live kernel, node b two.
//   - A new session created through a, whose one kernel is live, lands on b (which has a free slot)
//     instead of hibernating a's session, and answers right through a.
//   - A hibernated session nobody serves (released by b's drain), woken through the full a, is
//     claimed and served by b.
func TestPlacement(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	a := startNode(t, "a", dsn, placementEnv...)
	b := startNode(t, "b", dsn, append(placementEnv, "CARRYOVER_CAPACITY_MAX_LIVE_KERNELS=2")...)
	ctx := t.Context()
	releasedSession(t, b, "v = 'kept'", "pl-w")
	// a's view of the loads is read after its heartbeats: until it has read b's since b's restart
	// (b drained, so its row was gone), a sees no peer with room and keeps what it is sent, as
	// designed (a stale view costs a placement, never a loop)
	eventually(t, 10*time.Second, "a reads b's load after b's restart", func() bool {
		l, ok := viewOf(t, a, "b")
		return ok && l.LiveKernels == 0 && l.MaxLiveKernels == 2
	})

	// a new session through a full a goes to b
	if _, err := a.c.CreateSession(ctx, client.CreateRequest{SessionID: "pl-a"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "pl-a", "a = 1") // a's one kernel is live now
	if _, err := a.c.CreateSession(ctx, client.CreateRequest{SessionID: "pl-new"}); err != nil {
		t.Fatal(err)
	}
	if owner := ownerNodeOf(t, a, "pl-new"); owner != "b" {
		t.Fatalf("the new session created through a full a is owned by %q, want b", owner)
	}
	if got := run(t, a, "pl-new", "print(6 * 7)").Stdout; got != "42\n" {
		t.Fatalf("new session through a: %q", got)
	}
	// a hibernated session nobody serves, woken through a full a, is served by b (once a has read
	// b's load with pl-new's kernel: a counts what it placed on b until its next read)
	eventually(t, 10*time.Second, "a reads b's load", func() bool {
		l, ok := viewOf(t, a, "b")
		return ok && l.LiveKernels == 1 && l.MaxLiveKernels == 2
	})
	if got := run(t, a, "pl-w", "print(v)").Stdout; got != "kept\n" {
		t.Fatalf("woken through a: %q", got)
	}
	if owner := ownerNodeOf(t, b, "pl-w"); owner != "b" {
		t.Fatalf("the woken session is owned by %q, want b (a was full)", owner)
	}
	if types := eventTypes(t, a, "pl-a"); contains(types, "session_hibernated") {
		t.Fatalf("a hibernated its session for sessions b had room for: %v", types)
	}
	if m := metricLine(t, a, `carryover_cluster_placements_total{to="peer"}`); m != "2" {
		t.Fatalf("a's placements to a peer: %q, want 2", m)
	}
	if strings.Contains(a.log(), "proxy to owner failed") {
		t.Fatal("a proxied request to a placed session was cut (its watch took b's claim for a change of owner)")
	}
}

// TestPlacementClusterFull: two nodes holding one live kernel each, both busy (neither is ever idle:
// a view of the cluster that says full cannot be followed by one that says a node has room). A new session
// through a is refused at once: 429, code capacity, Retry-After, a message that says the cluster is
// full. The wake of a hibernated session nobody serves stays on a (no node has room) and is refused
// with 429, Retry-After and the same words once a's queue time (1 s) is over.
func TestPlacementClusterFull(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn, placementEnv...), startNode(t, "b", dsn, placementEnv...)
	ctx := t.Context()
	releasedSession(t, b, "v = 'kept'", "pf-w")
	for _, n := range []*node{a, b} {
		id := "pf-" + n.name
		if _, err := n.c.CreateSession(ctx, client.CreateRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
		// One run that starts the kernel and keeps it busy: between two runs the kernel is idle for a
		// moment, and a view of the cluster read then (b could hibernate it) placed the wake on b.
		go n.c.Run(ctx, id, client.RunRequest{Code: "import time\ntime.sleep(120)"})
		t.Cleanup(func() { n.c.Interrupt(context.Background(), id) })
	}
	eventually(t, 20*time.Second, "every kernel busy", func() bool { return allBusy(t, a, 1) && allBusy(t, b, 1) })
	eventually(t, 20*time.Second, "every kernel busy, as a sees the cluster", func() bool {
		status, _, _, reason, _ := rawPost(t, a, "/api/sessions", `{"session_id":"pf-new"}`)
		if status < 300 {
			t.Fatalf("a new session was created with every kernel of the cluster busy")
		}
		return reason == "cluster_full" // until a reads b's busy load, b refuses what a sends it
	})
	status, retry, code, _, msg := rawPost(t, a, "/api/sessions", `{"session_id":"pf-new"}`)
	if status != http.StatusTooManyRequests || code != "capacity" || retry == "" || !strings.Contains(msg, "cluster is at capacity") {
		t.Fatalf("create on a full cluster: %d %q Retry-After %q: %s", status, code, retry, msg)
	}
	t.Logf("create on a full cluster: %s", msg)
	status, retry, code, _, msg = rawPost(t, a, "/api/sessions/pf-w/run", `{"code":"print(v)"}`)
	if status != http.StatusTooManyRequests || code != "capacity" || retry == "" || !strings.Contains(msg, "cluster is at capacity") {
		t.Fatalf("wake on a full cluster: %d %q Retry-After %q: %s", status, code, retry, msg)
	}
	t.Logf("wake on a full cluster: %s", msg)
}

// allBusy reports whether node n holds live kernels, each running a turn.
func allBusy(t *testing.T, n *node, live int) bool {
	st, err := n.c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.Sessions.Live == live && st.Sessions.Busy == live
}

// viewOf is node name's load as node n last read it (GET /api/status's cluster).
func viewOf(t *testing.T, n *node, name string) (client.ClusterNode, bool) {
	st, err := n.c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Cluster {
		if c.NodeID == name {
			return c, true
		}
	}
	return client.ClusterNode{}, false
}

// metricLine is the value of a /metrics sample of node n ("" when absent).
func metricLine(t *testing.T, n *node, sample string) string {
	var body []byte
	if err := n.c.Do(t.Context(), http.MethodGet, "/metrics", nil, &body); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

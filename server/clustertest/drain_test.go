package clustertest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// readyz is node n's GET /readyz: its status code and reason (0 when it did not answer).
func readyz(n *node) (int, string) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(n.base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var out struct{ Status, Reason string }
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Status + " " + out.Reason
}

// TestDrainHandsOverWhileServing: a SIGTERMed node hands an idle session over while it still
// serves, instead of closing its port and releasing everything at exit. Node a has two sessions;
// one runs a turn that waits for the test (it keeps a draining), the other is idle. After SIGTERM,
// while that turn still runs on a: a answers /readyz 503; a turn of the idle session sent to a is
// answered (a forwards it to b, which claims it with its checkpoint) and b owns it; then the turn in
// flight ends with its answer on a (a read of its session meanwhile is answered by a), and a exits. The old drain closed a's listener first: the turn
// sent to a met a refused connection until a exited, and the session stayed a's until then.
func TestDrainHandsOverWhileServing(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	long := "CARRYOVER_CLUSTER_TTL_SECONDS=600" // nothing moves by a TTL here: only by the drain
	// a's grace outlasts the test's steps under load: the turn in flight must end by itself, answered.
	a, b := startNode(t, "a", dsn, long, "CARRYOVER_SERVER_SHUTDOWN_GRACE_SECONDS=300"), startNode(t, "b", dsn, long)
	for _, id := range []string{"busy", "idle"} {
		if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: id}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, a, "idle", "x = 'kept'")
	run(t, a, "busy", "import os, time")
	flag := filepath.Join(t.TempDir(), "go")
	busy := make(chan *client.RunResult, 1)
	go func() {
		r, err := a.c.Run(context.WithoutCancel(t.Context()), "busy", client.RunRequest{Code: "while not os.path.exists(" +
			strconv.Quote(flag) + "): time.sleep(0.02)\ny = 'after'\nprint(y)"})
		if err != nil {
			t.Errorf("the turn in flight at SIGTERM: %v", err)
		}
		busy <- r
	}()
	eventually(t, 30*time.Second, "the busy turn running on a", func() bool {
		st, err := a.c.Status(t.Context())
		return err == nil && st.Sessions.Busy == 1
	})
	a.p.Signal(syscall.SIGTERM)
	eventually(t, 30*time.Second, "a answering /readyz 503 while it drains", func() bool {
		code, _ := readyz(a)
		return code == http.StatusServiceUnavailable
	})
	if code, why := readyz(b); code != http.StatusOK {
		t.Fatalf("b: /readyz %d %s", code, why)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r, err := a.c.Run(ctx, "idle", client.RunRequest{Code: "print(x)"})
	if err != nil || strings.TrimSpace(r.Stdout) != "kept" {
		t.Fatalf("a turn of the idle session sent to the draining node: %+v %v", r, err)
	}
	select {
	case <-a.p.Exited():
		t.Fatalf("a exited before its turn in flight ended")
	default:
	}
	if s, err := b.c.GetSession(t.Context(), "idle"); err != nil || s.OwnerNode != "b" {
		t.Fatalf("the idle session after its handover: %+v %v, want it owned by b", s, err)
	}
	// A read of the session whose turn holds its handover back is answered at once, by a.
	if s, err := a.c.GetSession(ctx, "busy"); err != nil || s.OwnerNode != "a" {
		t.Fatalf("a read of the busy session during the drain: %+v %v, want it served by a", s, err)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-busy; r == nil || strings.TrimSpace(r.Stdout) != "after" {
		t.Fatalf("the turn in flight at SIGTERM: %+v", r)
	}
	a.term()
	if r := run(t, b, "busy", "print(y)"); strings.TrimSpace(r.Stdout) != "after" {
		t.Fatalf("busy on b after a exited: %q", r.Stdout)
	}
	gapless(t, b, "idle")
	gapless(t, b, "busy")
}

// TestReadyWhenPoolWarm: a node answers /readyz 503 until its warm pool is full, so a load balancer
// sends it no session it would start cold; from the first 200 on, its pool holds every warm kernel.
func TestReadyWhenPoolWarm(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDB(t)
	n := startNode(t, "w", dsn, "CARRYOVER_POOL_SIZE=2")
	sawWarming := false
	eventually(t, 120*time.Second, "w ready", func() bool {
		code, why := readyz(n)
		sawWarming = sawWarming || (code == http.StatusServiceUnavailable && strings.Contains(why, "warming"))
		return code == http.StatusOK
	})
	st, err := n.c.Status(t.Context())
	if err != nil || st.Pool.Idle < 2 {
		t.Fatalf("ready with %d warm kernels of 2 (%v)", st.Pool.Idle, err)
	}
	// Whether a 503 "warming" was seen depends on whether the listener opened before the pool
	// filled (a race of the start-up): said, not asserted. The assertion is the one above.
	t.Logf("a 503 warming seen before the first 200: %v", sawWarming)
}

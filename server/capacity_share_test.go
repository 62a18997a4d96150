package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/configs"
	"github.com/carryover/carryover/internal/servertest"
)

// TestCapacityFairShareBetweenTenants: a node of 4 live kernels shared by two tenants, acme and the
// default one (beta here). Eviction: beta's one session is the least recently used, yet when
// acme's fourth session needs a slot, acme (3 of 4 slots, over its share of 2) gives up one of its
// own. Queue: with all 4 kernels busy, acme queues two turns, then beta one; when an acme turn
// ends, beta's turn (beta under its share) goes first, acme's two still wait. Every session keeps
// its variables.
func TestCapacityFairShareBetweenTenants(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "", capacity(4, 2*time.Minute), func(c *configs.Config) {
		c.Pool.Size, c.Pool.MaxSize = 0, 0
		c.Auth.Tenants = map[string]string{"acme": "acme-token"}
	})
	acme, beta := newClient(ts.base, "acme-token"), ts.c
	ctx := ts.ctx()
	b := []string{servertest.ID(t), servertest.ID(t)}
	a := []string{servertest.ID(t), servertest.ID(t), servertest.ID(t), servertest.ID(t), servertest.ID(t)}
	for _, s := range []struct {
		c   *client.Client
		ids []string
	}{{beta, b}, {acme, a}} {
		for _, id := range s.ids {
			if _, err := s.c.CreateSession(ctx, client.CreateRequest{SessionID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	runOK(t, beta, b[0], "me = 'b0'") // the least recently used of the node from here on
	for i := range 4 {
		runOK(t, acme, a[i], fmt.Sprintf("me = 'a%d'", i))
	}
	if h := hibernations(t, beta, b[0]); len(h) != 0 {
		t.Fatalf("beta's only session was hibernated for acme's fourth: %v", h)
	}
	if h := hibernations(t, acme, a[0]); len(h) != 1 || h[0] != "capacity" {
		t.Fatalf("acme's least recently used session was not the one hibernated: %v", h)
	}

	// All 4 busy: beta's b0, acme's a1..a3.
	busy := map[string]chan error{b[0]: runAsync(beta, b[0], busyCell)}
	for _, id := range a[1:4] {
		busy[id] = runAsync(acme, id, busyCell)
	}
	waitStarted(t, beta, b[0])
	for _, id := range a[1:4] {
		waitStarted(t, acme, id)
	}
	queued := []chan error{runAsync(acme, a[0], "me"), runAsync(acme, a[4], "me = 'a4'")}
	waitQueued(t, beta, 2)
	// beta's turn stays busy once it has its slot: the moment it ends, b1 is an idle session that
	// acme's next claim may hibernate (that is the design), so acme's queue is read while it runs
	// (read after its answer, it raced with that hibernation and failed on a loaded host).
	busy[b[1]] = runAsync(beta, b[1], "me = 'b1'\n"+busyCell)
	waitQueued(t, beta, 3)
	interrupt(t, acme, a[1], busy[a[1]])
	waitStarted(t, beta, b[1])
	if st, err := beta.Status(ctx); err != nil || st.Capacity.Queued != 2 {
		t.Errorf("acme's two turns should still wait while beta's runs: %s %v", dump(st), err)
	}
	for _, id := range a[2:4] {
		interrupt(t, acme, id, busy[id])
	}
	interrupt(t, beta, b[0], busy[b[0]])
	interrupt(t, beta, b[1], busy[b[1]])
	for _, q := range queued {
		if err := <-q; err != nil {
			t.Errorf("acme's queued turn: %v", err)
		}
	}
	for i, id := range a {
		if got := resultOf(mustRun(t, acme, id, "me")); got != fmt.Sprintf("'a%d'", i) {
			t.Errorf("acme's session %d: me = %s", i, got)
		}
	}
	for i, id := range b {
		if got := resultOf(mustRun(t, beta, id, "me")); got != fmt.Sprintf("'b%d'", i) {
			t.Errorf("beta's session %d: me = %s", i, got)
		}
	}
}

// runOK runs code in session id or fails the test.
func runOK(t *testing.T, c *client.Client, id, code string) {
	t.Helper()
	mustRun(t, c, id, code)
}

// mustRun runs code in session id, failing the test unless it ran without error.
func mustRun(t *testing.T, c *client.Client, id, code string) *client.RunResult {
	t.Helper()
	r, err := c.Run(t.Context(), id, client.RunRequest{Code: code})
	if err == nil && r.Status != "ok" {
		err = fmt.Errorf("status %s: %s", r.Status, dump(r.Error))
	}
	if err != nil {
		t.Fatalf("run %q in %s: %v", code, id, err)
	}
	return r
}

// runAsync runs code in session id in the background; the channel gets the outcome (an error for a
// failed call or a cell that raised, but for an interrupt).
func runAsync(c *client.Client, id, code string) chan error {
	done := make(chan error, 1)
	go func() {
		r, err := c.Run(context.Background(), id, client.RunRequest{Code: code})
		if err == nil && r.Status != "ok" && !strings.Contains(dump(r.Error), "KeyboardInterrupt") {
			err = fmt.Errorf("status %s: %s", r.Status, dump(r.Error))
		}
		done <- err
	}()
	return done
}

// waitStarted waits until session id runs busyCell (its file started exists).
func waitStarted(t *testing.T, c *client.Client, id string) {
	t.Helper()
	waitUntil(t, id+" running its busy cell", func() bool {
		_, err := c.GetFile(t.Context(), id, "started")
		return err == nil
	})
}

// waitQueued waits until n claims queue for a slot.
func waitQueued(t *testing.T, admin *client.Client, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d turns queued", n), func() bool {
		st, err := admin.Status(t.Context())
		return err == nil && st.Capacity.Queued == n
	})
}

// interrupt ends session id's busy cell and waits for its answer.
func interrupt(t *testing.T, c *client.Client, id string, done chan error) {
	t.Helper()
	if _, err := c.Interrupt(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("busy cell of %s: %v", id, err)
	}
}

// hibernations lists the reasons of session id's session_hibernated events.
func hibernations(t *testing.T, c *client.Client, id string) []string {
	t.Helper()
	evs, err := c.Events(t.Context(), id, 0, 100, "session_hibernated")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		var pl struct{ Reason string }
		_ = json.Unmarshal(e.Payload, &pl)
		out = append(out, pl.Reason)
	}
	return out
}

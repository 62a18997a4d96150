package clustertest

import (
	"testing"

	"github.com/carryover/carryover/client"
	"github.com/carryover/carryover/internal/pgtest"
)

// TestIdempotentRetryOnAnyNode: a run with an idempotency key answered by node a; the same key
// sent to b (which proxies to the owner, a) gets the stored answer, and so does it once a drained
// and b serves the session itself, from the record in PostgreSQL: the cell ran once.
func TestIdempotentRetryOnAnyNode(t *testing.T) {
	dsn := pgtest.NewDB(t)
	a, b := startNode(t, "a", dsn), startNode(t, "b", dsn)
	if _, err := a.c.CreateSession(t.Context(), client.CreateRequest{SessionID: "idem"}); err != nil {
		t.Fatal(err)
	}
	run(t, a, "idem", "L = []")
	req := client.RunRequest{Code: "L.append(len(L)); print('ran', L)", IdempotencyKey: client.NewIdempotencyKey()}
	first, err := a.c.Run(t.Context(), "idem", req)
	if err != nil || first.Stdout != "ran [0]\n" {
		t.Fatalf("first attempt on a: %+v %v", first, err)
	}
	viaB, err := b.c.Run(t.Context(), "idem", req)
	if err != nil || viaB.Stdout != first.Stdout || viaB.ExecutionCount != first.ExecutionCount {
		t.Fatalf("retry through b: %+v %v, want the first answer", viaB, err)
	}
	a.term() // drained: b claims the session on the next request
	onB, err := b.c.Run(t.Context(), "idem", req)
	if err != nil || onB.Stdout != first.Stdout || onB.ExecutionCount != first.ExecutionCount {
		t.Fatalf("retry on b once it serves the session: %+v %v, want the first answer", onB, err)
	}
	if got := run(t, b, "idem", "print(L)").Stdout; got != "[0]\n" {
		t.Fatalf("the list is %q: the cell ran more than once", got)
	}
	if owner := ownerNodeOf(t, b, "idem"); owner != "b" {
		t.Fatalf("owner %q: the last retries were not served by b itself", owner)
	}
}

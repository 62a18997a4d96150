package session

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/mock"
	"github.com/carryover/carryover/server/idempotency"
)

// counting is a CommandFn that counts its runs, prints the count, and waits for gate (when not nil)
// before it exits.
func counting(n *int, mu *sync.Mutex, gate <-chan struct{}) func(context.Context, kernel.CommandSpec) (kernel.Process, error) {
	return func(_ context.Context, spec kernel.CommandSpec) (kernel.Process, error) {
		mu.Lock()
		*n++
		fmt.Fprintf(spec.Stdout, "run %d", *n)
		mu.Unlock()
		if gate != nil {
			<-gate
		}
		return mock.Exited(0), nil
	}
}

func TestIdempotentExecRunsOnce(t *testing.T) {
	s, _, prov := testService(t, nil)
	var n int
	var mu sync.Mutex
	prov.CommandFn = counting(&n, &mu, nil)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	req := CommandRequest{Command: "true", IdempotencyKey: "k-1"}
	first, err := handleOf(t, s, "x").RunCommand(context.Background(), req, CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replayed := false
	second, err := handleOf(t, s, "x").RunCommand(context.Background(), req, CommandOptions{OnReplay: func() { replayed = true }})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || second.Stdout != "run 1" || second.Stdout != first.Stdout || !replayed {
		t.Fatalf("ran %d times; answers %q then %q (replayed %v): want one run and its answer twice", n, first.Stdout, second.Stdout, replayed)
	}
	// The same key with another request is refused; another key runs.
	_, err = handleOf(t, s, "x").RunCommand(context.Background(), CommandRequest{Command: "false", IdempotencyKey: "k-1"}, CommandOptions{})
	wantCode(t, err, carryover.CodeIdempotencyKeyReused)
	if _, err := handleOf(t, s, "x").RunCommand(context.Background(), CommandRequest{Command: "true", IdempotencyKey: "k-2"}, CommandOptions{}); err != nil || n != 2 {
		t.Fatalf("another key: %v, %d runs", err, n)
	}
	// A key is the session's: the same key on another session runs there.
	mustCreate(t, s, CreateRequest{SessionID: "y"})
	if _, err := handleOf(t, s, "y").RunCommand(context.Background(), req, CommandOptions{}); err != nil || n != 3 {
		t.Fatalf("the key on another session: %v, %d runs", err, n)
	}
}

func TestIdempotentRetryWaitsForTheFirstAttempt(t *testing.T) {
	s, _, prov := testService(t, nil)
	var n int
	var mu sync.Mutex
	gate := make(chan struct{})
	prov.CommandFn = counting(&n, &mu, gate)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	req := CommandRequest{Command: "true", IdempotencyKey: "slow"}
	answers := make(chan string, 3)
	var wg sync.WaitGroup
	x := handleOf(t, s, "x")
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := x.RunCommand(context.Background(), req, CommandOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			answers <- res.Stdout
		}()
	}
	// Wait until one runs, then let it finish: the others wait for its answer.
	for {
		mu.Lock()
		started := n
		mu.Unlock()
		if started > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(gate)
	wg.Wait()
	close(answers)
	for a := range answers {
		if a != "run 1" {
			t.Errorf("answer %q, want the first attempt's", a)
		}
	}
	if n != 1 {
		t.Fatalf("ran %d times", n)
	}
	// A waiting retry gives up with its caller.
	gate2 := make(chan struct{})
	prov.CommandFn = counting(&n, &mu, gate2)
	before := len(prov.Commands())
	x = handleOf(t, s, "x")
	go func() {
		_, _ = x.RunCommand(context.Background(), CommandRequest{Command: "true", IdempotencyKey: "held"}, CommandOptions{})
	}()
	waitFor(t, "the first attempt's command started", func() bool { return len(prov.Commands()) > before })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := handleOf(t, s, "x").RunCommand(ctx, CommandRequest{Command: "true", IdempotencyKey: "held"}, CommandOptions{})
	wantCode(t, err, carryover.CodeTimeout)
	close(gate2)
}

func TestIdempotentRefusedTurnReleasesItsKey(t *testing.T) {
	ctx := context.Background()
	s, store, prov := testService(t, nil)
	var n int
	var mu sync.Mutex
	prov.CommandFn = counting(&n, &mu, nil)
	mustCreate(t, s, CreateRequest{SessionID: "x", Budget: &carryover.Budget{IterationLimit: 1}})
	if _, err := handleOf(t, s, "x").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{}); err != nil {
		t.Fatal(err)
	}
	req := CommandRequest{Command: "true", IdempotencyKey: "k"}
	for range 2 { // the retry is judged afresh (refused again), not answered run_interrupted
		_, err := handleOf(t, s, "x").RunCommand(ctx, req, CommandOptions{})
		wantCode(t, err, carryover.CodeBudgetExceeded)
		if _, err := store.GetIdempotencyKey(ctx, "x", "k"); err == nil {
			t.Fatal("a refused turn kept its key: the retry could never run")
		}
	}
	if n != 1 {
		t.Fatalf("%d runs, want only the unkeyed one", n)
	}
}

func TestIdempotentErrorAnswerIsReplayed(t *testing.T) {
	s, _, prov := testService(t, nil)
	p := mock.Hanging()
	runs := 0
	prov.CommandFn = func(context.Context, kernel.CommandSpec) (kernel.Process, error) { runs++; return p, nil }
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	req := CommandRequest{Command: "sleep 99", TimeoutSeconds: ptr(0.05), IdempotencyKey: "t"}
	first, err := handleOf(t, s, "x").RunCommand(context.Background(), req, CommandOptions{})
	wantCode(t, err, carryover.CodeTimeout)
	second, err := handleOf(t, s, "x").RunCommand(context.Background(), req, CommandOptions{})
	wantCode(t, err, carryover.CodeTimeout)
	if runs != 1 || second == nil || second.TimedOut != first.TimedOut || carryover.ErrorOf(err).Result != second {
		t.Fatalf("runs %d; replayed answer %+v, error's result %v", runs, second, carryover.ErrorOf(err).Result)
	}
}

func TestIdempotencyKeyValidation(t *testing.T) {
	s, _, prov := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	for _, key := range []string{strings.Repeat("k", idempotency.KeyMax+1), "a\nb", "caf\u00e9"} {
		_, err := handleOf(t, s, "x").RunCommand(context.Background(), CommandRequest{Command: "true", IdempotencyKey: key}, CommandOptions{})
		wantCode(t, err, carryover.CodeInvalid)
	}
	if n := len(prov.Commands()); n != 0 {
		t.Fatalf("%d commands ran for refused keys", n)
	}
}

func TestIdempotencyKeysExpire(t *testing.T) {
	ctx := context.Background()
	s, store, _ := testService(t, func(c *Config) { c.IdempotencyTTL = time.Nanosecond })
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	if _, err := handleOf(t, s, "x").RunCommand(ctx, CommandRequest{Command: "true", IdempotencyKey: "k"}, CommandOptions{}); err != nil {
		t.Fatal(err)
	}
	s.adm.idem.Expire(ctx)
	if _, err := store.GetIdempotencyKey(ctx, "x", "k"); err == nil {
		t.Fatal("an expired key survived the GC")
	}
}

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
	first, err := s.RunCommand(context.Background(), "x", req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, replayed := WithReplayNotice(context.Background())
	second, err := s.RunCommand(ctx, "x", req)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || second.Stdout != "run 1" || second.Stdout != first.Stdout || !replayed.Load() {
		t.Fatalf("ran %d times; answers %q then %q (replayed %v): want one run and its answer twice", n, first.Stdout, second.Stdout, replayed.Load())
	}
	// The same key with another request is refused; another key runs.
	_, err = s.RunCommand(context.Background(), "x", CommandRequest{Command: "false", IdempotencyKey: "k-1"})
	wantCode(t, err, carryover.CodeIdempotencyKeyReused)
	if _, err := s.RunCommand(context.Background(), "x", CommandRequest{Command: "true", IdempotencyKey: "k-2"}); err != nil || n != 2 {
		t.Fatalf("another key: %v, %d runs", err, n)
	}
	// A key is the session's: the same key on another session runs there.
	mustCreate(t, s, CreateRequest{SessionID: "y"})
	if _, err := s.RunCommand(context.Background(), "y", req); err != nil || n != 3 {
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
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.RunCommand(context.Background(), "x", req)
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
	go func() {
		_, _ = s.RunCommand(context.Background(), "x", CommandRequest{Command: "true", IdempotencyKey: "held"})
	}()
	for {
		s.idem.mu.Lock()
		_, busy := s.idem.inflight["x\x00held"]
		s.idem.mu.Unlock()
		if busy {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.RunCommand(ctx, "x", CommandRequest{Command: "true", IdempotencyKey: "held"})
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
	if _, err := s.RunCommand(ctx, "x", CommandRequest{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	req := CommandRequest{Command: "true", IdempotencyKey: "k"}
	for range 2 { // the retry is judged afresh (refused again), not answered run_interrupted
		_, err := s.RunCommand(ctx, "x", req)
		wantCode(t, err, carryover.CodeBudgetExceeded)
		if _, err := store.GetIdempotencyKey(ctx, "x", "k"); err == nil {
			t.Fatal("a refused turn kept its key: the retry could never run")
		}
	}
	if n != 1 {
		t.Fatalf("%d runs, want only the unkeyed one", n)
	}
}

func TestIdempotentKeyOfADeadAttemptIsNotRunAgain(t *testing.T) {
	ctx := context.Background()
	s, store, prov := testService(t, nil)
	var n int
	var mu sync.Mutex
	prov.CommandFn = counting(&n, &mu, nil)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	req := CommandRequest{Command: "true"}
	now := time.Now().UTC()
	// Reserved by a server process that stopped before it stored the answer.
	if _, won, err := store.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "x", Key: "k", Fingerprint: fingerprint("exec", req),
		Attempt: "gone", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil || !won {
		t.Fatal(won, err)
	}
	req.IdempotencyKey = "k"
	_, err := s.RunCommand(ctx, "x", req)
	wantCode(t, err, carryover.CodeRunInterrupted)
	if n != 0 {
		t.Fatalf("the command of a dead attempt ran again (%d runs)", n)
	}
	if !strings.Contains(carryover.ErrorOf(err).Message, "not run again") {
		t.Fatalf("message %q does not say what happened", carryover.ErrorOf(err).Message)
	}
}

func TestIdempotentErrorAnswerIsReplayed(t *testing.T) {
	s, _, prov := testService(t, nil)
	p := mock.Hanging()
	runs := 0
	prov.CommandFn = func(context.Context, kernel.CommandSpec) (kernel.Process, error) { runs++; return p, nil }
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	req := CommandRequest{Command: "sleep 99", TimeoutSeconds: ptr(0.05), IdempotencyKey: "t"}
	first, err := s.RunCommand(context.Background(), "x", req)
	wantCode(t, err, carryover.CodeTimeout)
	second, err := s.RunCommand(context.Background(), "x", req)
	wantCode(t, err, carryover.CodeTimeout)
	if runs != 1 || second == nil || second.TimedOut != first.TimedOut || carryover.ErrorOf(err).Result != second {
		t.Fatalf("runs %d; replayed answer %+v, error's result %v", runs, second, carryover.ErrorOf(err).Result)
	}
}

func TestIdempotencyKeyValidation(t *testing.T) {
	s, _, prov := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	for _, key := range []string{strings.Repeat("k", IdempotencyKeyMax+1), "a\nb", "caf\u00e9"} {
		_, err := s.RunCommand(context.Background(), "x", CommandRequest{Command: "true", IdempotencyKey: key})
		wantCode(t, err, carryover.CodeInvalid)
	}
	_, err := s.RunCommand(context.Background(), "nope", CommandRequest{Command: "true", IdempotencyKey: "k"})
	wantCode(t, err, carryover.CodeNotFound)
	if n := len(prov.Commands()); n != 0 {
		t.Fatalf("%d commands ran for refused keys", n)
	}
}

func TestIdempotencyKeysExpire(t *testing.T) {
	ctx := context.Background()
	s, store, _ := testService(t, func(c *Config) { c.IdempotencyTTL = time.Nanosecond })
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	if _, err := s.RunCommand(ctx, "x", CommandRequest{Command: "true", IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	s.expireIdempotencyKeys(ctx)
	if _, err := store.GetIdempotencyKey(ctx, "x", "k"); err == nil {
		t.Fatal("an expired key survived the GC")
	}
}

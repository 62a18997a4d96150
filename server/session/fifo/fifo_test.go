package fifo

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond for up to a second.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (l *Lock) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}

func TestFIFOLockServesInArrivalOrder(t *testing.T) {
	var l Lock
	ctx := context.Background()
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			l.Unlock()
		}()
		waitFor(t, "waiter to queue", func() bool { return l.waiting() == i+1 }) // arrival order is i
	}
	l.Unlock()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("served %v, want 0..%d in order", order, n-1)
		}
	}
	if l.Busy() {
		t.Fatal("lock still held after every waiter unlocked")
	}
}

func TestFIFOLockCancelledWaiterLeavesQueue(t *testing.T) {
	var l Lock
	if !l.TryLock() {
		t.Fatal("TryLock of a free lock failed")
	}
	if l.TryLock() {
		t.Fatal("TryLock of a held lock succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.Lock(ctx) }()
	waitFor(t, "waiter to queue", func() bool { return l.waiting() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock = %v", err)
	}
	if l.waiting() != 0 {
		t.Fatal("a cancelled waiter stayed in the queue")
	}
	l.Unlock()
	if l.Busy() {
		t.Fatal("Unlock handed the lock to a waiter that had gone")
	}
	if err := l.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestFIFOLockHandoffRacingCancel(t *testing.T) {
	// Whatever wins between the hand-off and the context's end, the lock is never lost: after the
	// waiter returns (with or without it) and lets go, the lock can be taken again.
	for i := 0; i < 200; i++ {
		var l Lock
		_ = l.Lock(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- l.Lock(ctx) }()
		waitFor(t, "waiter to queue", func() bool { return l.waiting() == 1 })
		go cancel()
		l.Unlock()
		if err := <-errc; err == nil {
			l.Unlock()
		}
		if !l.TryLock() {
			t.Fatalf("round %d: the lock was lost in a hand-off to a cancelled waiter", i)
		}
	}
}

// LockQueued tells its caller when it holds its place in line, before the lock is its: a caller
// that starts its next request only then keeps its own requests in order without timing.
func TestFIFOLockQueuedKeepsACallersOrder(t *testing.T) {
	var l Lock
	ctx := context.Background()
	if err := l.LockQueued(ctx, func() {}); err != nil { // free: the lock is had at once
		t.Fatal(err)
	}
	const n = 20
	got := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		queued := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.LockQueued(ctx, func() { close(queued) }); err != nil {
				t.Error(err)
				return
			}
			got <- i
			l.Unlock()
		}()
		<-queued // i is in line: only now is i+1 started
		if w := l.waiting(); w != i+1 {
			t.Fatalf("after %d queued, %d waiting", i+1, w)
		}
	}
	l.Unlock()
	wg.Wait()
	close(got)
	want := 0
	for i := range got {
		if i != want {
			t.Fatalf("served %d, want %d", i, want)
		}
		want++
	}
}

// TestHolder: Holder answers the tag of whoever holds the lock, from the moment it has it (a waiter
// handed the lock by Unlock too) to its Unlock; nil when free or held without a tag.
func TestHolder(t *testing.T) {
	var l Lock
	ctx := context.Background()
	if l.Holder() != nil {
		t.Fatal("a free lock has a holder")
	}
	seen := make(chan any, 1)
	if err := l.LockAs(ctx, func() { seen <- l.Holder() }, "first"); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != "first" {
		t.Fatalf("holder when queued on a free lock: %v", got)
	}
	got := make(chan error, 1)
	go func() { got <- l.LockAs(ctx, nil, "second") }()
	waitFor(t, "the second in line", func() bool { return l.waiting() == 1 })
	if h := l.Holder(); h != "first" {
		t.Fatalf("holder with a waiter: %v", h)
	}
	l.Unlock()
	if err := <-got; err != nil || l.Holder() != "second" {
		t.Fatalf("holder after hand-over: %v %v", err, l.Holder())
	}
	l.Unlock()
	if !l.TryLock() || l.Holder() != nil {
		t.Fatalf("TryLock's holder: %v", l.Holder())
	}
	l.Unlock()
	if l.Holder() != nil || l.Busy() {
		t.Fatal("a lock unlocked keeps a holder")
	}
}

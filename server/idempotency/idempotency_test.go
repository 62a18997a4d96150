package idempotency

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/mock"
)

type answer struct{ N int32 }

// newKeys is Keys over a mock store holding session "s".
func newKeys(t *testing.T) (*Keys, *mock.Store) {
	t.Helper()
	store := mock.NewStore()
	if err := store.CreateSession(context.Background(), carryover.SessionRecord{ID: "s", Doc: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	return New(store, time.Hour, nil), store
}

// counter is work that counts its runs, calling started first.
func counter(n *atomic.Int32) func(context.Context, func() error) (*answer, error) {
	return func(_ context.Context, started func() error) (*answer, error) {
		if err := started(); err != nil {
			return nil, err
		}
		return &answer{N: n.Add(1)}, nil
	}
}

// mustStart calls the started function Do gave the work, failing the test if it refuses.
func mustStart(t *testing.T, started func() error) {
	t.Helper()
	if err := started(); err != nil {
		t.Error(err)
	}
}

func wantCode(t *testing.T, err error, code carryover.Code) {
	t.Helper()
	if e := carryover.ErrorOf(err); err == nil || e.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}

// TestRunsOnceThenReplays: the second attempt with a key gets the first answer, replayed; the key
// with another body is refused; another key runs.
func TestRunsOnceThenReplays(t *testing.T) {
	t.Parallel()
	k, _ := newKeys(t)
	var n atomic.Int32
	ctx := context.Background()
	r := Request{Scope: "s", Key: "k", Kind: "run", Body: "1+1"}
	first, replayed, err := Do(ctx, k, r, counter(&n))
	if err != nil || replayed || first.N != 1 {
		t.Fatalf("first: %+v %v %v", first, replayed, err)
	}
	second, replayed, err := Do(ctx, k, r, counter(&n))
	if err != nil || !replayed || second.N != 1 || n.Load() != 1 {
		t.Fatalf("retry: %+v replayed %v %v, ran %d times", second, replayed, err, n.Load())
	}
	_, replayed, err = Do(ctx, k, Request{Scope: "s", Key: "k", Kind: "run", Body: "2+2"}, counter(&n))
	wantCode(t, err, carryover.CodeIdempotencyKeyReused)
	if replayed {
		t.Error("a refused reuse is not a replay")
	}
	if res, _, err := Do(ctx, k, Request{Scope: "s", Key: "k2", Kind: "run", Body: "1+1"}, counter(&n)); err != nil || res.N != 2 {
		t.Fatalf("another key: %+v %v", res, err)
	}
}

// TestUnstartedWorkReleasesItsKey: work refused before it called started leaves no key: a retry
// runs. Work that started and failed keeps its answer, error and result both.
func TestUnstartedWorkReleasesItsKey(t *testing.T) {
	t.Parallel()
	k, _ := newKeys(t)
	ctx := context.Background()
	r := Request{Scope: "s", Key: "k", Kind: "run"}
	refused := errors.New("paused")
	if _, _, err := Do(ctx, k, r, func(context.Context, func() error) (*answer, error) { return nil, refused }); !errors.Is(err, refused) {
		t.Fatal(err)
	}
	var n atomic.Int32
	if res, replayed, err := Do(ctx, k, r, counter(&n)); err != nil || replayed || res.N != 1 {
		t.Fatalf("retry after a refusal: %+v %v %v", res, replayed, err)
	}
	r.Key = "failed"
	timeout := carryover.Errorf(carryover.CodeTimeout, "too slow")
	_, _, _ = Do(ctx, k, r, func(_ context.Context, started func() error) (*answer, error) {
		mustStart(t, started)
		return &answer{N: 7}, timeout
	})
	res, replayed, err := Do(ctx, k, r, counter(&n))
	wantCode(t, err, carryover.CodeTimeout)
	if !replayed || res == nil || res.N != 7 || carryover.ErrorOf(err).Result.(*answer).N != 7 || n.Load() != 1 {
		t.Fatalf("replayed error answer: %+v %v %v", res, replayed, err)
	}
}

// TestPendingKeyOfADeadAttempt: a key reserved by an attempt that is not in flight here (another
// process's, cut off) is run_interrupted, never run again.
func TestPendingKeyOfADeadAttempt(t *testing.T) {
	t.Parallel()
	k, store := newKeys(t)
	ctx := context.Background()
	r := Request{Scope: "s", Key: "k", Kind: "exec", Body: "true"}
	now := time.Now().UTC()
	if _, _, err := store.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: "s", Key: "k",
		Fingerprint: fingerprint("exec", "true"), Attempt: "gone-1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	_, _, err := Do(ctx, k, r, counter(&n))
	wantCode(t, err, carryover.CodeRunInterrupted)
	if n.Load() != 0 || !strings.Contains(err.Error(), "exec may have run") {
		t.Fatalf("ran %d times: %v", n.Load(), err)
	}
}

// TestRetryWaitsForTheAttemptInFlight: a retry arriving while the first attempt runs here waits
// for it and gets its answer; one whose context ends first gives up with timeout.
func TestRetryWaitsForTheAttemptInFlight(t *testing.T) {
	t.Parallel()
	k, _ := newKeys(t)
	r := Request{Scope: "s", Key: "k", Kind: "run"}
	gate, inside := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _, _ = Do(context.Background(), k, r, func(_ context.Context, started func() error) (*answer, error) {
			mustStart(t, started)
			close(inside)
			<-gate
			return &answer{N: n.Add(1)}, nil
		})
	})
	<-inside
	short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, _, err := Do(short, k, r, counter(&n))
	wantCode(t, err, carryover.CodeTimeout)
	done := make(chan *answer)
	go func() { res, _, _ := Do(context.Background(), k, r, counter(&n)); done <- res }()
	time.Sleep(20 * time.Millisecond) // the retry is waiting (nothing to observe: it blocks)
	close(gate)
	if res := <-done; res == nil || res.N != 1 || n.Load() != 1 {
		t.Fatalf("the waiting retry got %+v, ran %d times", res, n.Load())
	}
	wg.Wait()
}

// TestValidate: 1 to 255 printable ASCII characters.
func TestValidate(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", strings.Repeat("k", KeyMax+1), "a\nb", "caf\u00e9"} {
		wantCode(t, Validate(key), carryover.CodeInvalid)
	}
	if err := Validate(strings.Repeat("k", KeyMax)); err != nil {
		t.Fatal(err)
	}
}

// TestSettleStoresTheAnswerEarly: work that calls Settle has its answer stored then, with the
// context it gave (before it returns); Do stores nothing more, a retry gets that answer, and Settle
// outside keyed work, or before started, does nothing.
func TestSettleStoresTheAnswerEarly(t *testing.T) {
	t.Parallel()
	k, store := newKeys(t)
	ctx := context.Background()
	Settle(ctx, &answer{N: 9}, nil) // not keyed work: nothing to do
	r := Request{Scope: "s", Key: "early", Kind: "run", Body: "1+1"}
	var doneInside bool
	first, _, err := Do(ctx, k, r, func(ctx context.Context, started func() error) (*answer, error) {
		Settle(ctx, &answer{N: 1}, nil) // before started: the key is not kept yet
		if rec, _ := store.GetIdempotencyKey(ctx, "s", "early"); rec.State == carryover.IdempotencyDone {
			t.Error("Settle before started stored an answer")
		}
		mustStart(t, started)
		Settle(ctx, &answer{N: 2}, nil)
		rec, err := store.GetIdempotencyKey(ctx, "s", "early")
		doneInside = err == nil && rec.State == carryover.IdempotencyDone
		Settle(ctx, &answer{N: 3}, nil) // a second time: nothing
		return &answer{N: 2}, nil
	})
	if err != nil || first.N != 2 || !doneInside {
		t.Fatalf("first: %+v %v, answer stored before the work returned: %v", first, err, doneInside)
	}
	again, replayed, err := Do(ctx, k, r, func(context.Context, func() error) (*answer, error) {
		t.Error("a settled key ran again")
		return nil, nil
	})
	if err != nil || !replayed || again.N != 2 {
		t.Fatalf("retry: %+v replayed %v %v", again, replayed, err)
	}
}

// syncingStore is a mock store that can defer its flush (carryover.Syncer): Sync blocks until
// release is closed and counts the reservations it saw deferred.
type syncingStore struct {
	*mock.Store
	release  chan struct{}
	deferred atomic.Int32
	synced   atomic.Bool
}

func (s *syncingStore) ReserveIdempotencyKey(ctx context.Context, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error) {
	if carryover.SyncDeferred(ctx) {
		s.deferred.Add(1)
	}
	return s.Store.ReserveIdempotencyKey(ctx, r)
}

func (s *syncingStore) Sync(context.Context) error {
	<-s.release
	s.synced.Store(true)
	return nil
}

// TestReservationFlushedBeforeStarted: on a store that defers flushes the reservation commits
// without one, the work runs up to started meanwhile, and started returns only once the flush did:
// the key is durable before the work's effect begins.
func TestReservationFlushedBeforeStarted(t *testing.T) {
	t.Parallel()
	base, _ := newKeys(t)
	st := &syncingStore{Store: base.store.(*mock.Store), release: make(chan struct{})}
	k := New(st, time.Hour, nil)
	ready := make(chan struct{})
	go func() {
		<-ready // the work got ready while the flush was pending
		time.Sleep(10 * time.Millisecond)
		close(st.release)
	}()
	res, _, err := Do(context.Background(), k, Request{Scope: "s", Key: "flush", Kind: "run", Body: "1"},
		func(_ context.Context, started func() error) (*answer, error) {
			close(ready)
			mustStart(t, started)
			if !st.synced.Load() {
				t.Error("started returned before the reservation was flushed")
			}
			return &answer{N: 1}, nil
		})
	if err != nil || res.N != 1 || st.deferred.Load() != 1 {
		t.Fatalf("%+v %v; deferred reservations %d, want 1", res, err, st.deferred.Load())
	}
}

// failingSync is a store that defers its flushes, the next of which fails while fail is set.
type failingSync struct {
	*mock.Store
	fail atomic.Bool
}

func (s *failingSync) Sync(context.Context) error {
	if s.fail.Load() {
		return errors.New("fsync: input/output error")
	}
	return nil
}

// TestUnflushedReservationRunsNothing: when the flush that makes a reservation durable fails, the
// work is refused at started (a crash could lose the key, and a retry would run the work twice):
// the work's effect never happens, the answer says why, and the key is released, so a retry runs
// the work, once.
func TestUnflushedReservationRunsNothing(t *testing.T) {
	t.Parallel()
	base, _ := newKeys(t)
	st := &failingSync{Store: base.store.(*mock.Store)}
	st.fail.Store(true)
	k := New(st, time.Hour, nil)
	r := Request{Scope: "s", Key: "disk", Kind: "run", Body: "orders.append(7)"}
	var n atomic.Int32
	_, replayed, err := Do(context.Background(), k, r, counter(&n))
	wantCode(t, err, carryover.CodeInternal)
	if n.Load() != 0 || replayed || !strings.Contains(err.Error(), "nothing was run") || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("runs %d, replayed %v, err %v", n.Load(), replayed, err)
	}
	st.fail.Store(false)
	res, replayed, err := Do(context.Background(), k, r, counter(&n))
	if err != nil || replayed || res.N != 1 || n.Load() != 1 {
		t.Fatalf("retry once the disk is back: %+v replayed %v %v (runs %d)", res, replayed, err, n.Load())
	}
}

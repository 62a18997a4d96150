// Package idempotency runs a keyed request once (carryover.IdempotencyStore): a run or a shell
// command sent with a key runs once; a retry with the key gets the first attempt's answer. The
// order of a keyed request (Do):
//  1. this process marks the key in flight (a local retry waits for it instead of racing it);
//  2. the key is reserved in the store, pending, before the work starts: a retry reaching any node,
//     or this one after a restart, finds it;
//  3. the work runs, calling started just before its effect begins (a cell's code, a command);
//     started waits for the reservation to be on disk, and refuses (an error the work must return)
//     when it could not be: a crash could lose the key, and a retry would run the work again;
//  4. its answer is stored with the key (done): when the work returns, or before, when the work
//     calls Settle (a turn does, among its own writes, before it answers).
//
// A retry that finds the key done gets the stored answer (replayed); one that finds it pending with
// no attempt in flight in this process (the process that reserved it stopped, or lost the session
// to another node, between 2 and 4) gets run_interrupted: the work may have run, so it is never run
// again blindly. Work refused before it called started (paused, over budget, a kernel that would
// not start) releases the key, so a retry runs it.
//
// It imports the domain package and the standard library only.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
)

// KeyMax is the longest key accepted.
const KeyMax = 255

// DefaultTTL is how long a key binds when New is given none.
const DefaultTTL = 24 * time.Hour

// Store is what Keys needs of a key table: carryover.IdempotencyStore (a session's keys) or
// TenantStore over carryover.EphemeralKeyStore (a tenant's keys of throwaway runs).
type Store interface {
	ReserveIdempotencyKey(ctx context.Context, r carryover.IdempotencyRecord) (carryover.IdempotencyRecord, bool, error)
	FinishIdempotencyKey(ctx context.Context, scope, key, attempt string, answer json.RawMessage) error
	ReleaseIdempotencyKey(ctx context.Context, scope, key, attempt string) error
	ExpireIdempotencyKeys(ctx context.Context, now time.Time) (int, error)
}

// Keys is a process's side of idempotency keys over a store; New makes one.
type Keys struct {
	store Store
	ttl   time.Duration
	log   *slog.Logger

	process  string        // this process's id
	attempts atomic.Uint64 // reservations made by this process
	mu       sync.Mutex
	inflight map[string]chan struct{} // scope + NUL + key -> closed when its attempt here is over
	lastGC   time.Time
}

// New returns the keys of store, each binding for ttl (<= 0: DefaultTTL).
func New(store Store, ttl time.Duration, log *slog.Logger) *Keys {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if log == nil {
		log = slog.Default()
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return &Keys{store: store, ttl: ttl, log: log, process: hex.EncodeToString(b), inflight: map[string]chan struct{}{}}
}

// Request is one keyed request.
type Request struct {
	Scope string // what the key belongs to: a session's id, or a tenant's name (TenantStore)
	Key   string
	Kind  string // what runs, named in errors: "run", "exec"
	Body  any    // the request without its key: its fingerprint tells a retry from a reuse
}

// Validate checks a client's key: 1 to 255 printable ASCII characters.
func Validate(key string) error {
	if key == "" || len(key) > KeyMax {
		return carryover.Errorf(carryover.CodeInvalid, "idempotency key must be 1 to %d characters", KeyMax).WithDetails("field", "idempotency_key")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return carryover.Errorf(carryover.CodeInvalid, "idempotency key must be printable ASCII").WithDetails("field", "idempotency_key")
		}
	}
	return nil
}

// Do runs do once for (r.Scope, r.Key): see the package's doc. do calls started just before its
// effect begins, and returns at once with started's error, if any (its effect must not begin);
// replayed is true when the answer is the stored one of an earlier attempt.
func Do[T any](ctx context.Context, k *Keys, r Request, do func(ctx context.Context, started func() error) (*T, error)) (res *T, replayed bool, err error) {
	if err := Validate(r.Key); err != nil {
		return nil, false, err
	}
	leave, err := k.enter(ctx, r)
	if err != nil {
		return nil, false, err
	}
	defer leave()
	now := time.Now().UTC()
	fp := fingerprint(r.Kind, r.Body)
	attempt := k.process + "-" + strconv.FormatUint(k.attempts.Add(1), 10)
	durable, rctx := k.reserveSync(ctx)
	rec, won, err := k.store.ReserveIdempotencyKey(rctx, carryover.IdempotencyRecord{SessionID: r.Scope, Key: r.Key,
		Fingerprint: fp, Attempt: attempt, CreatedAt: now, ExpiresAt: now.Add(k.ttl)})
	if err != nil {
		return nil, false, err
	}
	if !won {
		return replay[T](rec, fp, r.Kind)
	}
	wait := durable() // the reservation is flushed while the work gets ready; started waits for it
	var began, settled atomic.Bool
	early := func(sctx context.Context, res any, err error) {
		if began.Load() && settled.CompareAndSwap(false, true) {
			k.settle(context.WithoutCancel(sctx), r, attempt, true, res, err)
		}
	}
	res, runErr := do(context.WithValue(ctx, settleKey{}, settleFunc(early)), func() error {
		if err := wait(); err != nil { // not durable: a retry after a crash could run the work again
			k.log.Error("idempotency key reserved but not flushed to disk: the work is refused", "scope", r.Scope, "err", err)
			return carryover.Wrap(carryover.CodeInternal, err,
				"the idempotency key %q could not be made durable, so nothing was run (a retry with it runs it)", r.Key)
		}
		began.Store(true)
		return nil
	})
	if settled.CompareAndSwap(false, true) {
		k.settle(context.WithoutCancel(ctx), r, attempt, began.Load(), res, runErr)
	}
	return res, false, runErr
}

// reserveSync is how a reservation becomes durable before the work's effect begins. On a store
// that can defer its flush (carryover.Syncer: SQLite under synchronous=full) the reservation commits
// without one (rctx) and durable starts the flush at once, in the background; the work readies
// itself meanwhile (its turn's admission, its checkpoint's preparation) and started waits for the
// flush: the key is on disk before the code runs, as before, without the work waiting for the disk
// first. Elsewhere the reservation's commit is durable itself and wait returns at once.
func (k *Keys) reserveSync(ctx context.Context) (durable func() (wait func() error), rctx context.Context) {
	sy, ok := k.store.(carryover.Syncer)
	if !ok {
		return func() func() error { return func() error { return nil } }, ctx
	}
	return func() func() error {
		done := make(chan error, 1)
		go func() { done <- sy.Sync(context.WithoutCancel(ctx)) }()
		var once sync.Once
		var err error
		return func() error {
			once.Do(func() { err = <-done })
			return err
		}
	}, carryover.DeferSync(ctx)
}

// settleKey carries, in the context Do gives its work, the function Settle calls.
type settleKey struct{}

type settleFunc func(ctx context.Context, res any, err error)

// Settle stores the answer of the keyed work whose context ctx is (the one Do gave it), now rather
// than when the work returns, with ctx's write options: a turn settles its key among its own
// writes, before the one flush that makes them all durable (carryover.DeferSync), so its answer
// leaves after one flush, not two. res and err must be what the work returns. It does nothing
// outside keyed work, before started was called, or a second time.
func Settle(ctx context.Context, res any, err error) {
	if f, ok := ctx.Value(settleKey{}).(settleFunc); ok {
		f(ctx, res, err)
	}
}

// enter marks r's key in flight here; when it already is, it waits for that attempt to be over.
func (k *Keys) enter(ctx context.Context, r Request) (leave func(), err error) {
	name := r.Scope + "\x00" + r.Key
	for {
		k.mu.Lock()
		busy, ok := k.inflight[name]
		if !ok {
			ch := make(chan struct{})
			k.inflight[name] = ch
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.inflight, name)
				k.mu.Unlock()
				close(ch)
			}, nil
		}
		k.mu.Unlock()
		select { // the first attempt is in flight here: its answer is the answer
		case <-busy:
		case <-ctx.Done():
			return nil, carryover.Wrap(carryover.CodeTimeout, ctx.Err(), "gave up waiting for the first attempt with idempotency key %q", r.Key)
		}
	}
}

// storedAnswer is what a finished key keeps: the answer and the error its first attempt returned.
type storedAnswer struct {
	Result json.RawMessage  `json:"result,omitempty"`
	Error  *carryover.Error `json:"error,omitempty"`
}

// settle releases the key of work that never started, or stores the answer of work that did.
func (k *Keys) settle(ctx context.Context, r Request, attempt string, began bool, res any, runErr error) {
	if !began {
		if err := k.store.ReleaseIdempotencyKey(ctx, r.Scope, r.Key, attempt); err != nil {
			k.log.Error("idempotency key not released after a refused request", "scope", r.Scope, "err", err)
		}
		return
	}
	answer := storedAnswer{}
	if res != nil {
		answer.Result, _ = json.Marshal(res)
	}
	if runErr != nil {
		answer.Error = carryover.ErrorOf(runErr)
	}
	body, _ := json.Marshal(answer)
	if err := k.store.FinishIdempotencyKey(ctx, r.Scope, r.Key, attempt, body); err != nil {
		// The key stays pending: a retry answers run_interrupted, never a second run.
		k.log.Error("answer of an idempotency key not stored", "scope", r.Scope, "err", err)
	}
}

// fingerprint identifies a request: its kind and body (the key itself left out by the caller).
func fingerprint(kind string, req any) string {
	b, _ := json.Marshal(req)
	h := sha256.Sum256(append([]byte(kind+"\x00"), b...))
	return hex.EncodeToString(h[:])
}

// replay answers a retry from the record its key holds; replayed when that is a stored answer.
func replay[T any](rec carryover.IdempotencyRecord, fp, kind string) (res *T, replayed bool, err error) {
	if rec.Fingerprint != fp {
		return nil, false, carryover.Errorf(carryover.CodeIdempotencyKeyReused,
			"idempotency key %q was first used with another request; a new request needs a new key", rec.Key).WithDetails("idempotency_key", rec.Key)
	}
	if rec.State != carryover.IdempotencyDone {
		return nil, false, carryover.Errorf(carryover.CodeRunInterrupted,
			"the first attempt with idempotency key %q was cut off (its server stopped or lost the session) before its answer was stored; "+
				"the %s may have run, so it is not run again: see the session's executions, and send a new key to run it", rec.Key, kind).
			WithDetails("idempotency_key", rec.Key, "reserved_at", rec.CreatedAt)
	}
	var a storedAnswer
	if err := json.Unmarshal(rec.Answer, &a); err != nil {
		return nil, false, carryover.Wrap(carryover.CodeInternal, err, "stored answer of idempotency key %q unreadable", rec.Key)
	}
	if len(a.Result) > 0 && string(a.Result) != "null" {
		res = new(T)
		if err := json.Unmarshal(a.Result, res); err != nil {
			return nil, false, carryover.Wrap(carryover.CodeInternal, err, "stored answer of idempotency key %q unreadable", rec.Key)
		}
	}
	if a.Error != nil {
		if res != nil {
			a.Error.Result = res
		}
		return res, true, a.Error
	}
	return res, true, nil
}

// Expire deletes expired keys, at most once every 10 minutes (a background loop calls it).
func (k *Keys) Expire(ctx context.Context) {
	k.mu.Lock()
	due := time.Since(k.lastGC) >= 10*time.Minute
	if due {
		k.lastGC = time.Now()
	}
	k.mu.Unlock()
	if !due {
		return
	}
	if n, err := k.store.ExpireIdempotencyKeys(ctx, time.Now().UTC()); err != nil {
		k.log.Warn("expired idempotency keys not deleted", "err", err)
	} else if n > 0 {
		k.log.Info("expired idempotency keys deleted", "count", n)
	}
}

package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carryover/carryover"
)

// Idempotency keys (carryover.IdempotencyStore): a run or a shell command sent with a key runs
// once; a retry with the key gets the first attempt's answer. The order of a keyed turn:
//  1. this process marks the key in flight (a local retry waits for it instead of racing it);
//  2. the key is reserved in the store, pending, before the cell starts: a retry reaching any node,
//     or this one after a restart, finds it;
//  3. the turn runs and is recorded as every turn is;
//  4. its answer is stored with the key (done).
//
// A retry that finds the key done gets the stored answer; one that finds it pending with no attempt
// in flight in this process (the process that reserved it stopped, or lost the session to another
// node, between 2 and 4) gets run_interrupted: the cell may have run, so it is never run again
// blindly. A turn refused before its code started (paused, over budget, a kernel that would not
// start) releases the key, so a retry runs it.

// IdempotencyKeyMax is the longest key accepted.
const IdempotencyKeyMax = 255

// DefaultIdempotencyTTL is how long a key binds when Config.IdempotencyTTL is zero.
const DefaultIdempotencyTTL = 24 * time.Hour

// idempotency is the service's in-process side of keys.
type idempotency struct {
	once     sync.Once
	process  string        // this process's id, drawn at first use
	attempts atomic.Uint64 // reservations made by this process
	mu       sync.Mutex
	inflight map[string]chan struct{} // session + NUL + key -> closed when its turn here is over
	lastGC   time.Time
}

// attemptID names one reservation: this server process and a count. Finishing or releasing a key
// matches it, so an attempt only ever settles its own record.
func (i *idempotency) attemptID() string {
	i.once.Do(func() {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		i.process = hex.EncodeToString(b)
	})
	return i.process + "-" + strconv.FormatUint(i.attempts.Add(1), 10)
}

// enter marks name in flight here and returns a leave func; when name is already in flight it
// returns the channel closed when that turn is over instead.
func (i *idempotency) enter(name string) (leave func(), busy <-chan struct{}) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if ch, ok := i.inflight[name]; ok {
		return nil, ch
	}
	if i.inflight == nil {
		i.inflight = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	i.inflight[name] = ch
	return func() {
		i.mu.Lock()
		delete(i.inflight, name)
		i.mu.Unlock()
		close(ch)
	}, nil
}

// ValidateIdempotencyKey checks a client's key: 1 to 255 printable ASCII characters.
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > IdempotencyKeyMax {
		return carryover.Errorf(carryover.CodeInvalid, "idempotency key must be 1 to %d characters", IdempotencyKeyMax).WithDetails("field", "idempotency_key")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return carryover.Errorf(carryover.CodeInvalid, "idempotency key must be printable ASCII").WithDetails("field", "idempotency_key")
		}
	}
	return nil
}

// keyedCall is one keyed turn in ctx: the service marks when its code starts, and whether its
// answer was a stored one.
type keyedCall struct {
	started  atomic.Bool
	replayed atomic.Bool
}

type keyedCallKey struct{}

// markStarted records, for a keyed turn, that its code is about to run: from here on a failure
// keeps the key (the code may have run) instead of releasing it.
func markStarted(ctx context.Context) {
	if c, ok := ctx.Value(keyedCallKey{}).(*keyedCall); ok {
		c.started.Store(true)
	}
}

// replayNotice is set by WithReplayNotice.
type replayNotice struct{ replayed *atomic.Bool }

type replayNoticeKey struct{}

// WithReplayNotice returns a ctx for a Run or RunCommand call and a flag that is true after the
// call when its answer was the stored answer of an earlier attempt with the same idempotency key
// (the front doors say so: the Idempotent-Replayed header; the websocket sends the frames itself).
func WithReplayNotice(ctx context.Context) (context.Context, *atomic.Bool) {
	b := &atomic.Bool{}
	return context.WithValue(ctx, replayNoticeKey{}, replayNotice{b}), b
}

// storedAnswer is what a finished key keeps: the answer and the error its first attempt returned.
type storedAnswer struct {
	Result json.RawMessage  `json:"result,omitempty"`
	Error  *carryover.Error `json:"error,omitempty"`
}

// fingerprint identifies a request: its kind and body (the key itself left out by the caller).
func fingerprint(kind string, req any) string {
	b, _ := json.Marshal(req)
	h := sha256.Sum256(append([]byte(kind+"\x00"), b...))
	return hex.EncodeToString(h[:])
}

// runKeyed runs do once for (session id, key): see the top of this file. req is the request without
// its key (its fingerprint).
func runKeyed[T any](ctx context.Context, s *Service, id, kind, key string, req any, do func(context.Context) (*T, error)) (*T, error) {
	if err := ValidateIdempotencyKey(key); err != nil {
		return nil, err
	}
	if _, err := s.get(id); err != nil {
		return nil, err
	}
	name := id + "\x00" + key
	for {
		leave, busy := s.idem.enter(name)
		if leave != nil {
			defer leave()
			break
		}
		select { // the first attempt is in flight here: its answer is the answer
		case <-busy:
		case <-ctx.Done():
			return nil, carryover.Wrap(carryover.CodeTimeout, ctx.Err(), "gave up waiting for the first attempt with idempotency key %q", key)
		}
	}
	now := time.Now().UTC()
	ttl := s.cfg.IdempotencyTTL
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	fp := fingerprint(kind, req)
	attempt := s.idem.attemptID()
	rec, won, err := s.store.ReserveIdempotencyKey(ctx, carryover.IdempotencyRecord{SessionID: id, Key: key, Fingerprint: fp,
		Attempt: attempt, CreatedAt: now, ExpiresAt: now.Add(ttl)})
	if err != nil {
		return nil, err
	}
	if !won {
		return replayKeyed[T](ctx, rec, fp, kind)
	}
	call := &keyedCall{}
	res, runErr := do(context.WithValue(ctx, keyedCallKey{}, call))
	bg := context.WithoutCancel(ctx)
	if !call.started.Load() {
		if err := s.store.ReleaseIdempotencyKey(bg, id, key, attempt); err != nil {
			s.log.Error("idempotency key not released after a refused turn", "session", id, "err", err)
		}
		return res, runErr
	}
	answer := storedAnswer{}
	if res != nil {
		answer.Result, _ = json.Marshal(res)
	}
	if runErr != nil {
		answer.Error = carryover.ErrorOf(runErr)
	}
	body, _ := json.Marshal(answer)
	if err := s.store.FinishIdempotencyKey(bg, id, key, attempt, body); err != nil {
		// The key stays pending: a retry answers run_interrupted, never a second run.
		s.log.Error("answer of an idempotency key not stored", "session", id, "err", err)
	}
	return res, runErr
}

// replayKeyed answers a retry from the record its key holds.
func replayKeyed[T any](ctx context.Context, rec carryover.IdempotencyRecord, fp, kind string) (*T, error) {
	if rec.Fingerprint != fp {
		return nil, carryover.Errorf(carryover.CodeIdempotencyKeyReused,
			"idempotency key %q was first used with another request; a new request needs a new key", rec.Key).WithDetails("idempotency_key", rec.Key)
	}
	if rec.State != carryover.IdempotencyDone {
		return nil, carryover.Errorf(carryover.CodeRunInterrupted,
			"the first attempt with idempotency key %q was cut off (its server stopped or lost the session) before its answer was stored; "+
				"the %s may have run, so it is not run again: see the session's executions, and send a new key to run it", rec.Key, kind).
			WithDetails("idempotency_key", rec.Key, "reserved_at", rec.CreatedAt)
	}
	var a storedAnswer
	if err := json.Unmarshal(rec.Answer, &a); err != nil {
		return nil, carryover.Wrap(carryover.CodeInternal, err, "stored answer of idempotency key %q unreadable", rec.Key)
	}
	var res *T
	if len(a.Result) > 0 && string(a.Result) != "null" {
		res = new(T)
		if err := json.Unmarshal(a.Result, res); err != nil {
			return nil, carryover.Wrap(carryover.CodeInternal, err, "stored answer of idempotency key %q unreadable", rec.Key)
		}
	}
	if n, ok := ctx.Value(replayNoticeKey{}).(replayNotice); ok {
		n.replayed.Store(true)
	}
	if a.Error != nil {
		if res != nil {
			a.Error.Result = res
		}
		return res, a.Error
	}
	return res, nil
}

// expireIdempotencyKeys deletes expired keys, at most once every 10 minutes (the background loop).
func (s *Service) expireIdempotencyKeys(ctx context.Context) {
	s.idem.mu.Lock()
	due := time.Since(s.idem.lastGC) >= 10*time.Minute
	if due {
		s.idem.lastGC = time.Now()
	}
	s.idem.mu.Unlock()
	if !due {
		return
	}
	if n, err := s.store.ExpireIdempotencyKeys(ctx, time.Now().UTC()); err != nil {
		s.log.Warn("expired idempotency keys not deleted", "err", err)
	} else if n > 0 {
		s.log.Info("expired idempotency keys deleted", "count", n)
	}
}

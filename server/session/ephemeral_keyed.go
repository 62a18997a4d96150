package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/carryover/carryover"
)

// RunEphemeralKeyed is RunEphemeral under an idempotency key (POST /api/execute with an
// Idempotency-Key): the run happens once; a retry with the key gets the first attempt's answer, or
// run_interrupted when that attempt was cut off after its code started. The key belongs to the
// tenant (carryover.EphemeralKeyStore), as a throwaway session cannot hold it. The order and the
// rules are runKeyed's (idempotency.go), with the tenant's key table in place of the session's.
func (s *Service) RunEphemeralKeyed(ctx context.Context, key string, req EphemeralRequest) (*RunResult, error) {
	if err := ValidateIdempotencyKey(key); err != nil {
		return nil, err
	}
	tenant := carryover.TenantFromContext(ctx)
	name := "\x01" + tenant + "\x00" + key // no session id starts with \x01
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
	fp := fingerprint("execute", req)
	attempt := s.idem.attemptID()
	rec, won, err := s.store.ReserveEphemeralKey(ctx, tenant, carryover.IdempotencyRecord{Key: key, Fingerprint: fp,
		Attempt: attempt, CreatedAt: now, ExpiresAt: now.Add(ttl)})
	if err != nil {
		return nil, err
	}
	if !won {
		return replayKeyed[RunResult](ctx, rec, fp, "execute")
	}
	call := &keyedCall{}
	res, runErr := s.RunEphemeral(context.WithValue(ctx, keyedCallKey{}, call), req)
	bg := context.WithoutCancel(ctx)
	if !call.started.Load() {
		if err := s.store.ReleaseEphemeralKey(bg, tenant, key, attempt); err != nil {
			s.log.Error("idempotency key of /api/execute not released after a refused run", "err", err)
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
	if err := s.store.FinishEphemeralKey(bg, tenant, key, attempt, body); err != nil {
		// The key stays pending: a retry answers run_interrupted, never a second run.
		s.log.Error("answer of an idempotency key of /api/execute not stored", "err", err)
	}
	return res, runErr
}

// expireEphemeralKeys deletes the expired keys of /api/execute, at most once every 10 minutes (the
// background loop keeps *last).
func (s *Service) expireEphemeralKeys(ctx context.Context, last *time.Time) {
	if time.Since(*last) < 10*time.Minute {
		return
	}
	*last = time.Now()
	if n, err := s.store.ExpireEphemeralKeys(ctx, time.Now().UTC()); err != nil {
		s.log.Warn("expired idempotency keys of /api/execute not deleted", "err", err)
	} else if n > 0 {
		s.log.Info("expired idempotency keys of /api/execute deleted", "count", n)
	}
}

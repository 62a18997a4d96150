package session

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/idempotency"
)

// RunEphemeralKeyed is RunEphemeral under an idempotency key (POST /api/execute with an
// Idempotency-Key): the run happens once; a retry with the key gets the first attempt's answer, or
// run_interrupted when that attempt was cut off after its code started. The key belongs to the
// tenant (carryover.EphemeralKeyStore through idempotency.TenantStore), as a throwaway session
// cannot hold it; the rules are idempotency.Do's. replayed: the answer is an earlier attempt's.
func (s *Service) RunEphemeralKeyed(ctx context.Context, key string, req EphemeralRequest) (res *RunResult, replayed bool, err error) {
	r := idempotency.Request{Scope: carryover.TenantFromContext(ctx), Key: key, Kind: "execute", Body: req}
	return idempotency.Do(ctx, s.adm.ephemeral, r, func(ctx context.Context, started func() error) (*RunResult, error) {
		return s.runEphemeral(ctx, req, started)
	})
}

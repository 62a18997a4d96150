package session

import (
	"context"

	"github.com/carryover/carryover/server/idempotency"
)

// Idempotency keys (package idempotency): a run or a shell command sent with a key runs once; a
// retry with the key gets the first attempt's answer. The key is the session's. The turn calls the
// started function it is given just before its code starts (RunOptions.started, runCommand): from
// there on its key is kept whatever happens, since the code may have run; a turn refused before
// (paused, over budget, a kernel that would not start) releases its key, so a retry runs it.

// runKeyed runs do once for session ls's key; onReplay, when set, is told that the answer is an
// earlier attempt's. req is the request without its key (its fingerprint).
func runKeyed[T any](ctx context.Context, ls *Session, kind, key string, req any, onReplay func(),
	do func(ctx context.Context, started func()) (*T, error)) (*T, error) {
	if err := idempotency.Validate(key); err != nil {
		return nil, err
	}
	res, replayed, err := idempotency.Do(ctx, ls.svc.adm.idem, idempotency.Request{Scope: ls.id, Key: key, Kind: kind, Body: req}, do)
	if replayed && onReplay != nil {
		onReplay()
	}
	return res, err
}

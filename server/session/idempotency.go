package session

import (
	"context"

	"github.com/carryover/carryover/server/idempotency"
)

// Idempotency keys (package idempotency): a run or a shell command sent with a key runs once; a
// retry with the key gets the first attempt's answer. The key is the session's. The turn calls the
// started function it is given just before its code starts (RunOptions.started, runCommand), and
// stops if it refuses (a key not made durable); from there on the key is kept whatever happens; a
// turn refused before (paused, over budget, no kernel) releases its key, so a retry runs it.

// runKeyed runs do once for session ls's key; onReplay, when set, is told that the answer is an
// earlier attempt's. req is the request without its key (its fingerprint). Do validates the key.
func runKeyed[T any](ctx context.Context, ls *Session, kind, key string, req any, onReplay func(),
	do func(ctx context.Context, started func() error) (*T, error)) (*T, error) {
	res, replayed, err := idempotency.Do(ctx, ls.svc.adm.idem, idempotency.Request{Scope: ls.id, Key: key, Kind: kind, Body: req}, do)
	if replayed && onReplay != nil {
		onReplay()
	}
	return res, err
}

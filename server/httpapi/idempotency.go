package httpapi

import (
	"net/http"

	"github.com/carryover/carryover"
)

// Idempotency keys on the API: the Idempotency-Key header (the IETF httpapi draft's name) or the
// body's idempotency_key; a replayed answer carries Idempotent-Replayed: true.
const (
	IdempotencyKeyHeader     = "Idempotency-Key"
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// keyFromHeader puts the request's Idempotency-Key header into *key; a header and a body field that
// disagree are refused.
func keyFromHeader(r *http.Request, key *string) error {
	h := r.Header.Get(IdempotencyKeyHeader)
	if h == "" {
		return nil
	}
	if *key != "" && *key != h {
		return carryover.Errorf(carryover.CodeInvalid, "the Idempotency-Key header and the body's idempotency_key differ").WithDetails("field", "idempotency_key")
	}
	*key = h
	return nil
}

// markReplayed sets Idempotent-Replayed on an answer that is an earlier attempt's stored one.
func markReplayed(w http.ResponseWriter, replayed bool) {
	if replayed {
		w.Header().Set(IdempotentReplayedHeader, "true")
	}
}

package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/carryover/carryover/client"
)

// The idempotency section measures what an Idempotency-Key costs a run: two store writes (the
// reservation before the cell, the answer after the turn) beside the turn's own. The peer is the
// same run without a key, interleaved with the keyed ones in one session so both see the same
// machine; a replay (a retry of a finished key) is beside it too, as what a retry costs.

func benchIdempotency(ctx context.Context, env *benchEnv) (rows []benchRow, err error) {
	h, err := startBenchSrv(ctx, env, "idempotency", nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if _, serr := h.stop(); err == nil {
			err = serr
		}
	}()
	if _, err := h.c.CreateSession(ctx, client.CreateRequest{SessionID: "idem"}); err != nil {
		return nil, err
	}
	n := 60
	if env.Quick {
		n = 8
	}
	path := "/api/sessions/idem/run"
	plain := func() error { return h.c.Do(ctx, http.MethodPost, path, client.RunRequest{Code: "x = 1"}, nil) }
	var lastKey string
	keyed := func() error {
		lastKey = client.NewIdempotencyKey()
		return h.c.DoWithHeader(ctx, http.MethodPost, path, http.Header{client.IdempotencyKeyHeader: {lastKey}}, client.RunRequest{Code: "x = 1"}, nil)
	}
	replay := func() error {
		return h.c.DoWithHeader(ctx, http.MethodPost, path, http.Header{client.IdempotencyKeyHeader: {lastKey}}, client.RunRequest{Code: "x = 1"}, nil)
	}
	for range 3 { // warm: the kernel, the first checkpoint
		if err := plain(); err != nil {
			return nil, err
		}
	}
	var tp, tk, tr []time.Duration
	timed := func(f func() error, into *[]time.Duration) error {
		start := time.Now()
		if err := f(); err != nil {
			return err
		}
		*into = append(*into, time.Since(start))
		return nil
	}
	for range n {
		if err := timed(plain, &tp); err != nil {
			return nil, err
		}
		if err := timed(keyed, &tk); err != nil {
			return nil, err
		}
		if err := timed(replay, &tr); err != nil {
			return nil, err
		}
	}
	p, k, r := percentile(tp, 50), percentile(tk, 50), percentile(tr, 50)
	rows = append(rows,
		benchRow{Name: "run `x = 1` with an Idempotency-Key (median)", Ours: fmtDur(k), Peer: fmtDur(p), Ratio: ratio(k, p),
			Note: fmt.Sprintf("peer: the same run without a key, interleaved, %d each; SQLite store", n)},
		benchRow{Name: "retry of a finished key: the stored answer (median)", Ours: fmtDur(r), Peer: fmtDur(k), Ratio: ratio(r, k),
			Note: "peer: the keyed run itself; the retry runs nothing"})
	return rows, nil
}

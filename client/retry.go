package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Retries ride out a node's restart, a rolling upgrade of a cluster or a moment of overload
// without code of the caller's own. A request is sent again, after a backoff, when
//   - the server could not be reached (connection refused, reset before an answer, DNS), for a
//     request that may be repeated: a GET, PUT or DELETE, or one that carries an Idempotency-Key
//     (Run and Exec set one per call, so a retry never runs a cell twice), or when nothing was sent;
//   - the server answered 421 (not_owner: the session's node changed; the first retry goes at
//     once, as the session's new node serves it), 503 (unavailable) or 429 (capacity or quota,
//     after its Retry-After).
//
// Any other answer, a 409 run_interrupted included, is returned at once.

// IdempotencyKeyHeader is the header a run's (or an exec's) idempotency key travels in.
const IdempotencyKeyHeader = "Idempotency-Key"

// RetryPolicy says how often and how long a Client retries (see the package's retry rules).
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one call, the first included (1: no retry).
	MaxAttempts int
	// MaxElapsed bounds the time spent retrying one call (the call's context bounds it too).
	MaxElapsed time.Duration
	// BaseDelay is the first backoff; each next one doubles, up to MaxDelay, with jitter.
	BaseDelay, MaxDelay time.Duration
}

// DefaultRetryPolicy rides out a restart of a few seconds up to a minute.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 30, MaxElapsed: 60 * time.Second, BaseDelay: 100 * time.Millisecond, MaxDelay: 3 * time.Second}

// WithRetry sets the retry policy; MaxAttempts 1 turns retries off.
func WithRetry(p RetryPolicy) Option {
	return func(c *Client) { c.retry = p }
}

// retryableStatus: the request was not served (not the session's node, unavailable, too many).
// A 429 is retried only when it says when to come back (Retry-After: capacity, rate_limited): a
// quota_exceeded has none, and waiting a minute would not free a tenant's quota.
func retryableStatus(code int, h http.Header) bool {
	switch code {
	case http.StatusMisdirectedRequest, http.StatusServiceUnavailable:
		return true
	case http.StatusTooManyRequests:
		return h.Get("Retry-After") != ""
	}
	return false
}

// sendFailed tells whether err from a send means nothing was sent (a dial failure), and whether
// it is a failure of the connection at all (rather than the caller's context, or a bad URL).
func sendFailed(err error) (unsent, connection bool) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true, true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true, true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op) {
		return false, true
	}
	// net/http's errServerClosedIdle (unexported): the pooled connection the request went out on had
	// been closed by the server (killed, restarted) before any answer. A connection failure like the
	// ones above; found by the chaos harness (a kill -9 of the server under a keyed run).
	if strings.Contains(err.Error(), "http: server closed idle connection") {
		return false, true
	}
	return false, false
}

// repeatable reports whether a request may be sent again after it may have reached the server.
func repeatable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return req.Header.Get(IdempotencyKeyHeader) != ""
}

// retryAfter reads a Retry-After header (seconds or an HTTP date); 0 when absent.
func retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// backoff is the wait before attempt n+1 (n >= 1): exponential with full jitter in its upper half.
func (p RetryPolicy) backoff(n int) time.Duration {
	d := float64(p.BaseDelay) * math.Pow(2, float64(n-1))
	if d > float64(p.MaxDelay) {
		d = float64(p.MaxDelay)
	}
	return time.Duration(d/2 + mrand.Float64()*d/2)
}

// retrier runs the attempts of one call.
type retrier struct {
	p     RetryPolicy
	start time.Time
	n     int // attempts made
}

// again reports whether to try once more after an attempt that failed with err or answered resp
// (resp is closed when it is retried), waiting the backoff (or Retry-After) first.
func (r *retrier) again(ctx context.Context, req *http.Request, resp *http.Response, err error, bodyReplayable bool) bool {
	r.n++
	if r.n >= r.p.MaxAttempts || !bodyReplayable {
		return false
	}
	wait := r.p.backoff(r.n)
	switch {
	case err != nil:
		unsent, conn := sendFailed(err)
		if !conn || (!unsent && !repeatable(req)) || ctx.Err() != nil {
			return false
		}
	case retryableStatus(resp.StatusCode, resp.Header):
		if ra := retryAfter(resp.Header); ra > 0 {
			wait = ra
		} else if resp.StatusCode == http.StatusMisdirectedRequest && r.n == 1 {
			wait = 0 // not_owner: the session just moved, and the next attempt finds its new node
		}
	default:
		return false
	}
	if time.Since(r.start)+wait > r.p.MaxElapsed {
		return false
	}
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// NewIdempotencyKey returns a fresh random key (what Run and Exec send when the request has none).
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "go-" + hex.EncodeToString(b)
}

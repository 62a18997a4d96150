package httpapi

import (
	"math"
	"sync"
	"time"
)

// RateLimit is the token bucket every credential gets (auth.rate_limit): PerSecond requests a
// second on average, bursts of up to Burst. A zero PerSecond means no limit.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// limiter keeps one token bucket per credential, on this node (a cluster of n nodes lets a key make
// up to n times its rate when its requests are spread over them).
type limiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rl RateLimit, now func() time.Time) *limiter {
	if rl.PerSecond <= 0 {
		return nil
	}
	burst := float64(rl.Burst)
	if burst < 1 {
		burst = math.Max(1, math.Ceil(rl.PerSecond))
	}
	return &limiter{rate: rl.PerSecond, burst: burst, now: now, buckets: map[string]*bucket{}}
}

// take spends one token of id's bucket. When there is none it answers false and how long until
// there is one (the Retry-After).
func (l *limiter) take(id string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
	b, ok := l.buckets[id]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[id] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return false, wait
}

// sweepLocked drops, once a minute, the buckets that have refilled: a full bucket is the same as
// none, so the map holds only credentials used in the last minute or so.
func (l *limiter) sweepLocked(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	for id, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, id)
		}
	}
}

package capacity

import (
	"fmt"
	"math"
	"time"

	"github.com/carryover/carryover"
)

// Refusal reasons: the capacity error's details.reason and the refusals metric's label.
const (
	reasonBusy         = "busy"          // the queue time ran out
	reasonQueueFull    = "queue_full"    // capacity.queue_max claims already queued
	reasonStartTimeout = "start_timeout" // a kernel did not start within its startup timeout
)

// StartRetrySeconds is the Retry-After of a kernel start that timed out: long enough for the
// starts in flight to finish, short against a turn an agent waits for.
const StartRetrySeconds = 5

// refuseLocked counts a refusal and builds its error: 429 capacity, saying why, with the seconds a
// client should wait (details.retry_after_seconds, the Retry-After header).
func (l *Ledger) refuseLocked(reason string) error {
	l.refused[reason]++
	l.m.refusals.WithLabelValues(reason).Inc()
	retry := int(math.Max(1, math.Ceil(l.wait.Seconds())))
	var msg string
	if reason == reasonQueueFull {
		msg = fmt.Sprintf("the node is at capacity: %d of %d kernels busy and %d requests already queued; retry in %d s",
			l.held, l.max, len(l.waiters), retry)
	} else {
		msg = fmt.Sprintf("the node is at capacity: %d of %d kernels busy for the %s this request queued; retry in %d s",
			l.held, l.max, l.wait.Round(time.Millisecond), retry)
	}
	return carryover.Errorf(carryover.CodeCapacity, "%s", msg).WithDetails(
		"reason", reason, "live", l.held, "capacity", l.max, "queued", len(l.waiters), "retry_after_seconds", retry)
}

// RefuseStart counts a kernel start that ran out of its own time (timeout) while its request still
// had time as a refusal (reason start_timeout) and builds its error: an overloaded node (a start
// that takes 1 s starved of CPU for 30) is a 429 with Retry-After, not a 500 that says nothing can
// be done.
func (l *Ledger) RefuseStart(timeout time.Duration, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused[reasonStartTimeout]++
	l.m.refusals.WithLabelValues(reasonStartTimeout).Inc()
	return (&carryover.Error{Code: carryover.CodeCapacity, Err: err, Message: fmt.Sprintf(
		"the node is overloaded: a kernel for the session did not start within its startup timeout (%s); retry in %d s (%v)",
		timeout, StartRetrySeconds, err)}).WithDetails("reason", reasonStartTimeout, "live", l.held, "capacity", l.max,
		"queued", len(l.waiters), "retry_after_seconds", StartRetrySeconds)
}

package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carryover/carryover"
)

// startRetrySeconds is the Retry-After of a kernel start that timed out: long enough for the
// starts in flight to finish, short against a turn an agent waits for.
const startRetrySeconds = 5

// startFailed is the error of a kernel that could not be started for a session. A start that ran
// out of its own time (kernel.startup_timeout_seconds) while the request still had time is an
// overloaded node (a start that takes 1 s starved of CPU for 30): that is a 429 capacity answer
// with Retry-After, counted with the other refusals, not a 500 that says nothing can be done.
func (s *Service) startFailed(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return s.slots.refuseStart(s.cfg.StartupTimeout, err)
	}
	return &carryover.Error{Code: carryover.CodeInternal, Message: fmt.Sprintf("no kernel could be started for the session: %v", err), Err: err}
}

// refuseStart counts a start timeout as a refusal (reason start_timeout) and builds its error.
func (sl *slots) refuseStart(timeout time.Duration, err error) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.refused["start_timeout"]++
	capacityRefusals.WithLabelValues("start_timeout").Inc()
	return (&carryover.Error{Code: carryover.CodeCapacity, Err: err, Message: fmt.Sprintf(
		"the node is overloaded: a kernel for the session did not start within its startup timeout (%s); retry in %d s (%v)",
		timeout, startRetrySeconds, err)}).WithDetails("reason", "start_timeout", "live", sl.held, "capacity", sl.max,
		"queued", len(sl.waiters), "retry_after_seconds", startRetrySeconds)
}

package kernel

// aborted.go: carryover's own requests to a kernel that answers "aborted". ipykernel aborts, for a
// moment after a cell that raised with stop_on_error, every execute_request that reaches it; the
// Jupyter door no longer lets a client's cell ask for that (RunRaw), but a kernel that still
// answers "aborted" must not cost a committed turn its checkpoint: an aborted request did not run
// at all, so it is sent again once the window closed.

import (
	"context"
	"fmt"
	"time"
)

// abortRetries bounds the retries of an aborted request: the window lasts one pass of the
// kernel's event loop, so a second try almost always runs.
const abortRetries = 5

// RetryAborted is a kernel as the checkpoint engine's executor (persistence.Executor), with
// Kernel.Eval's meaning, whose requests answered "aborted" are sent again.
type RetryAborted struct {
	Kernel *Kernel
	// Interrupted is what an error of a request a kernel interrupt stopped wraps (the executor's
	// sentinel: persistence.ErrInterrupted).
	Interrupted error
}

// Eval runs code, then evaluates expr (if any) to its text, as Kernel.Eval, sending a request the
// kernel aborted again.
func (r RetryAborted) Eval(ctx context.Context, code, expr string) (string, error) {
	opts := ExecOptions{Silent: true}
	if expr != "" {
		opts.UserExpressions = map[string]string{"r": expr}
	}
	for attempt := 1; ; attempt++ {
		res, err := r.Kernel.Execute(ctx, code, opts)
		if err != nil {
			return "", err
		}
		switch {
		case res.Status == "aborted" && attempt <= abortRetries:
			select {
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			case <-ctx.Done():
				return "", fmt.Errorf("kernel request aborted, not retried: %w", ctx.Err())
			}
			continue
		case res.Status == "aborted":
			return "", fmt.Errorf("the kernel aborted the request %d times (status aborted: ipykernel aborts execute requests for a moment after a cell raised)", attempt)
		case res.Status != "ok" && res.EName == "KeyboardInterrupt":
			return "", fmt.Errorf("%w: %s: %s", r.Interrupted, res.EName, res.EValue)
		case res.Status != "ok":
			return "", fmt.Errorf("%s: %s", res.EName, res.EValue)
		}
		if expr == "" {
			return "", nil
		}
		return UserExpressionText(res.UserExpressions["r"])
	}
}

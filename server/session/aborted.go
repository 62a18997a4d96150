package session

// aborted.go: carryover's own requests to a kernel that answers "aborted". ipykernel aborts, for a
// moment after a cell that raised with stop_on_error, every execute_request that reaches it; the
// Jupyter door no longer lets a client's cell ask for that (RunRaw), but a kernel that still
// answers "aborted" must not cost a committed turn its checkpoint: an aborted request did not run
// at all, so it is sent again once the window closed.

import (
	"context"
	"fmt"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// abortRetries bounds the retries of an aborted request: the window lasts one pass of the
// kernel's event loop, so a second try almost always runs.
const abortRetries = 5

// retryAborted is a kernel as the checkpoint engine's executor (persistence.Executor), with
// kernel.Kernel.Eval's meaning, whose requests answered "aborted" are sent again.
type retryAborted struct{ k *kernel.Kernel }

func (r retryAborted) Eval(ctx context.Context, code, expr string) (string, error) {
	opts := kernel.ExecOptions{Silent: true}
	if expr != "" {
		opts.UserExpressions = map[string]string{"r": expr}
	}
	for attempt := 1; ; attempt++ {
		res, err := r.k.Execute(ctx, code, opts)
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
			return "", fmt.Errorf("%w: %s: %s", persistence.ErrInterrupted, res.EName, res.EValue)
		case res.Status != "ok":
			return "", fmt.Errorf("%s: %s", res.EName, res.EValue)
		}
		if expr == "" {
			return "", nil
		}
		return kernel.UserExpressionText(res.UserExpressions["r"])
	}
}

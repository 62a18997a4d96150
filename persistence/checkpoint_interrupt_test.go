package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// interruptingExec is the session service's executor (server/session/aborted.go) whose first n
// snapshot requests a real interrupt stops: each waits in the kernel (a marker file says it got
// there) until the test's SIGINT arrives, as a user's interrupt meant for the cell that just ended.
type interruptingExec struct {
	k      *kernel.Kernel
	dir    string
	n      int
	marked int
}

func (e *interruptingExec) Eval(ctx context.Context, code, expr string) (string, error) {
	opts := kernel.ExecOptions{Silent: true, UserExpressions: map[string]string{"r": expr}}
	if strings.Contains(code, `"snapshot"`) && e.marked < e.n {
		e.marked++
		mark := filepath.Join(e.dir, fmt.Sprintf("in-snapshot-%d", e.marked))
		code = fmt.Sprintf("__import__('pathlib').Path(%q).touch(); __import__('time').sleep(60)\n", mark) + code
		go func() {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(mark); err == nil {
					_ = e.k.Interrupt(ctx)
					return
				}
			}
		}()
	}
	res, err := e.k.Execute(ctx, code, opts)
	switch {
	case err != nil:
		return "", err
	case res.Status != "ok" && res.EName == "KeyboardInterrupt":
		return "", fmt.Errorf("%w: %s: %s", persistence.ErrInterrupted, res.EName, res.EValue)
	case res.Status != "ok":
		return "", fmt.Errorf("%s: %s", res.EName, res.EValue)
	}
	return kernel.UserExpressionText(res.UserExpressions["r"])
}

// TestInterruptedSnapshotIsTakenAgain: an interrupt that lands in the turn's snapshot does not cost
// the turn its checkpoint (it did: "checkpoint failed ... KeyboardInterrupt" under the fuzz's
// interrupts), and what the retry saves is the whole turn; a second interrupt stops it.
func TestInterruptedSnapshotIsTakenAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ws, spool := kernelSession(t, "intr")
	k := agentKernel(t, c, ws, spool)
	run(t, k, "rows = [{'id': i, 'v': [i]} for i in range(3)]")
	if _, err := c.Checkpoint(ctx, k, "intr", 1, ws); err != nil {
		t.Fatal(err)
	}
	run(t, k, "rows[1]['v'][0] = -1\ncount = 2")
	res, err := c.Checkpoint(ctx, &interruptingExec{k: k, dir: t.TempDir(), n: 1}, "intr", 2, ws)
	if err != nil {
		t.Fatalf("a snapshot interrupted once: %v", err)
	}
	if strings.Join(res.Saved, ",") != "count,rows" {
		t.Errorf("saved %v, want count and rows", res.Saved)
	}
	run(t, k, "count = 3")
	if _, err := c.Checkpoint(ctx, &interruptingExec{k: k, dir: t.TempDir(), n: 2}, "intr", 3, ws); !errors.Is(err, persistence.ErrInterrupted) {
		t.Fatalf("a snapshot interrupted twice: %v, want it stopped", err)
	}

	k2 := agentKernel(t, c, ws, spool)
	if _, err := c.Restore(ctx, k2, "intr", "", ws, true); err != nil {
		t.Fatal(err)
	}
	if got := eval(t, k2, "(rows[1], count)"); got != "({'id': 1, 'v': [-1]}, 2)" {
		t.Errorf("restored %s", got)
	}
}

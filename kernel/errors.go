package kernel

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDied is matched (errors.Is) by every error that means "this kernel is gone": the process exited
// or was killed, the heartbeat stopped, or it was shut down or restarted under a running call.
var ErrDied = errors.New("kernel died")

// DiedError says why and how a kernel died. It satisfies errors.Is(err, ErrDied).
type DiedError struct {
	PID      int
	ExitCode int    // -1 when unknown (killed by a signal, or still running after a heartbeat loss)
	Signal   string // e.g. "killed" when the process died of a signal
	Reason   string // "process exited", "heartbeat lost", "shutdown", "restarted", ...
	LogTail  string // last lines of the kernel log, for the humans reading the error
}

func (e *DiedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel died (pid %d): %s", e.PID, e.Reason)
	if e.Signal != "" {
		fmt.Fprintf(&b, ", signal %s", e.Signal)
	} else if e.ExitCode >= 0 {
		fmt.Fprintf(&b, ", exit code %d", e.ExitCode)
	}
	if e.LogTail != "" {
		fmt.Fprintf(&b, "; log tail:\n%s", e.LogTail)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrDied) true for any *DiedError.
func (e *DiedError) Is(target error) bool { return target == ErrDied }

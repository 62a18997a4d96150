package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carryover/carryover/kernel"
)

// TestHeartbeatSeesTheKernelInItsBox: a boxed kernel that is stopped (SIGSTOP) is dead after its
// missed beats, as an unsandboxed one is. The heartbeat read the state of bubblewrap's wrapper,
// which runs while the kernel inside is stopped, so such a kernel was given WedgedAfter (a minute
// here) as if it were busy.
func TestHeartbeatSeesTheKernelInItsBox(t *testing.T) {
	k := startBoxedKernelWith(t, newProvisioner(t), t.TempDir(), func(o *kernel.Options) {
		o.HeartbeatInterval, o.IdleHeartbeatInterval, o.WedgedAfter = 200*time.Millisecond, time.Second, time.Minute
	})
	if _, err := k.Eval(context.Background(), "1", "1"); err != nil {
		t.Fatal(err)
	}
	bk := k.Process().(*boxKernel)
	inside := bk.KernelPID()
	if inside == 0 || inside == bk.PID() {
		t.Fatalf("the kernel's own pid %d (the wrapper's %d)", inside, bk.PID())
	}
	if err := unix.Kill(inside, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Kill(inside, unix.SIGCONT) }()
	stopped := time.Now()
	select {
	case <-k.Dead():
		var de *kernel.DiedError
		if !errors.As(k.Err(), &de) || !strings.Contains(de.Reason, "stopped or gone") {
			t.Errorf("Err = %v, want a heartbeat loss of a stopped process", k.Err())
		}
		t.Logf("a stopped boxed kernel declared dead %s after its SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	case <-time.After(20 * time.Second): // 3 idle beats are 3 s; WedgedAfter is a minute
		t.Fatalf("a boxed kernel stopped for 20 s is not dead (its wrapper %d runs: %s)", bk.PID(), procState(bk.PID()))
	}
}

// procState is pid's state letter from /proc, or "gone".
func procState(pid int) string {
	if st, ok := procStat(pid); ok {
		return string(st.state)
	}
	return "gone"
}

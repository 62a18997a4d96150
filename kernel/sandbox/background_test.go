package sandbox

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBackgroundOfADeadKernel: once the kernel is gone its box's listing says "cannot tell" (nil),
// never "none", while bubblewrap outside the box still runs. The outer bubblewrap is stopped here to
// hold open the moment a loaded host gives by chance: the kernel dead and reaped, the box's init
// gone too, its parent not yet woken to reap it. A cost sample taken then once listed no process
// (an empty list), and the kernel's death named none of the session's background processes.
func TestBackgroundOfADeadKernel(t *testing.T) {
	p := newProvisioner(t)
	k := startBoxedKernel(t, p)
	bk := k.Process().(*boxKernel)
	if _, err := k.Eval(context.Background(), "import subprocess\nslp = subprocess.Popen(['sleep', '1000'])", "slp.pid"); err != nil {
		t.Fatal(err)
	}
	procs := bk.Background()
	if len(procs) != 1 || procs[0].Command != "sleep 1000" {
		t.Fatalf("a live kernel's background: %+v, want the sleep", procs)
	}
	kernelPID := bk.kernelProcess()
	if kernelPID == 0 || kernelPID == bk.PID() {
		t.Fatalf("kernel pid %d (leader %d)", kernelPID, bk.PID())
	}
	leader := bk.PID()
	if err := unix.Kill(leader, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Kill(leader, unix.SIGCONT) }()
	// SIGSTOP takes effect when the leader is next scheduled: on a loaded host it may still be
	// runnable (R) after the kernel below is dead and reaped, so wait until it is stopped.
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st, ok := procStat(leader); ok && st.state == 'T' {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("bubblewrap (%d) not stopped 20 s after SIGSTOP", leader)
		}
	}
	if err := unix.Kill(kernelPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The box's init reaps the kernel; its orphan (the sleep) is init's child now, the oldest.
	for end := time.Now().Add(20 * time.Second); alive(kernelPID) || bk.box.topProcess(leader) == kernelPID; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the kernel (%d) outlived the kill", kernelPID)
		}
	}
	if st, ok := procStat(leader); !ok || st.state != 'T' {
		t.Fatalf("bubblewrap outside the box: %+v, want it stopped (the moment held open)", st)
	}
	if got := bk.Background(); got != nil {
		t.Fatalf("background of a dead kernel: %+v, want nil (cannot tell)", got)
	}
}

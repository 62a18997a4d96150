package kernel

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startGroup starts a process that leads a process group of its own and stops it at the test's end.
func startGroup(t testing.TB, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

// TestGroupScanReadsProcOnceForManyGroups: samples of several groups within the map's age read
// /proc whole once; a group started since is looked for at once; the leader's CPU is read fresh at
// every sample; a gone leader is an error.
func TestGroupScanReadsProcOnceForManyGroups(t *testing.T) {
	t.Parallel()
	g := &groupScan{every: time.Hour}
	a := startGroup(t, "sleep 300")
	b := startGroup(t, "sleep 300")
	for _, c := range []*exec.Cmd{a, b, a, b} {
		if _, err := g.stats(c.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if g.reads != 1 {
		t.Fatalf("%d full reads of /proc for four samples of two groups, want 1", g.reads)
	}

	// a new group: its leader is not in the map, so /proc is read again, once
	spin := startGroup(t, "while :; do :; done")
	first, err := g.stats(spin.Process.Pid)
	if err != nil || g.reads != 2 {
		t.Fatalf("new group: %v, %d reads (want 2)", err, g.reads)
	}
	// the leader's figures are fresh, not the map's
	waitForCPU(t, g, spin.Process.Pid, first.CPUSeconds+0.05, "the spinning leader's CPU")
	if g.reads != 2 {
		t.Fatalf("%d full reads, want 2: samples of a known group read only its members", g.reads)
	}

	// a gone leader is an error, as before
	_ = syscall.Kill(-b.Process.Pid, syscall.SIGKILL)
	_ = b.Wait()
	if _, err := g.stats(b.Process.Pid); err == nil {
		t.Fatal("a gone group's stats: no error")
	}
}

// TestGroupScanFindsNewMembersAfterEvery: a member that joined a known group is counted once the
// map is older than every.
func TestGroupScanFindsNewMembersAfterEvery(t *testing.T) {
	t.Parallel()
	g := &groupScan{every: 200 * time.Millisecond}
	// the shell leads the group; its child (same group) spins from the moment a file appears
	dir := t.TempDir()
	lead := startGroup(t, "while [ ! -e "+dir+"/go ]; do sleep 0.01; done; (while :; do :; done) & wait")
	before, err := g.stats(lead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("touch", dir+"/go").Run(); err != nil {
		t.Fatal(err)
	}
	waitForCPU(t, g, lead.Process.Pid, before.CPUSeconds+0.3, "the group's CPU (its new member not counted)")
}

// waitForCPU samples group pgid through g until its CPU reaches atLeast seconds, and fails t when it
// has not 10 s later (what names the figure in the failure).
func waitForCPU(t *testing.T, g *groupScan, pgid int, atLeast float64, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := g.stats(pgid)
		if err != nil {
			t.Fatal(err)
		}
		if st.CPUSeconds >= atLeast {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed at %.2f s, want %.2f", what, st.CPUSeconds, atLeast)
		}
	}
}

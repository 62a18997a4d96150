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
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := g.stats(spin.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.CPUSeconds >= first.CPUSeconds+0.05 {
			break // the leader's figures are fresh, not the map's
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spinning leader's CPU stayed at %.2f s", st.CPUSeconds)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := g.stats(lead.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.CPUSeconds >= before.CPUSeconds+0.3 {
			return // the spinning child, a new member, is counted
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's CPU stayed at %.2f s (from %.2f): its new member is not counted", st.CPUSeconds, before.CPUSeconds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

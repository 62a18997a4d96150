package kernel

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shTree starts sh with n background sleeps and waits until they are its children.
func shTree(t *testing.T, n int) (sh int, kids []int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", strings.Repeat("sleep 60 & ", n)+"wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, k := range childrenOf(cmd.Process.Pid) {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); len(kids) < n; kids = childrenOf(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("sh has %d children, want %d", len(kids), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd.Process.Pid, kids
}

func oomAdj(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func setOOMAdj(t *testing.T, pid, adj int) {
	t.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(adj)), 0); err != nil {
		t.Fatal(err)
	}
}

// TestRaiseOOMScoreRaisesTheTree: the process and every one below it take the score (a sandbox's
// wrapper forked the kernel), and none is lowered.
func TestRaiseOOMScoreRaisesTheTree(t *testing.T) {
	sh, kids := shTree(t, 2)
	setOOMAdj(t, kids[1], 950)
	if err := RaiseOOMScore(sh, 700); err != nil {
		t.Fatal(err)
	}
	if got := oomAdj(t, sh); got != 700 {
		t.Errorf("the process: %d, want 700", got)
	}
	if got := oomAdj(t, kids[0]); got != 700 {
		t.Errorf("its child: %d, want 700", got)
	}
	if got := oomAdj(t, kids[1]); got != 950 {
		t.Errorf("a child already higher: %d, want it left at 950", got)
	}
}

// TestRaiseOOMScoreStopsAtAProcessAlreadyRaised: a process found at the score already is not
// descended into (its children inherited it: a forked kernel raises its own before it has threads
// or children), so the walk skips reading every thread's children of a kernel.
func TestRaiseOOMScoreStopsAtAProcessAlreadyRaised(t *testing.T) {
	sh, kids := shTree(t, 1)
	setOOMAdj(t, sh, 800) // after the fork: the child is still 0, which only a walk would change
	if err := RaiseOOMScore(sh, 800); err != nil {
		t.Fatal(err)
	}
	if got := oomAdj(t, kids[0]); got != 0 {
		t.Fatalf("the child of a process already at the score: %d; the walk went below it", got)
	}
}

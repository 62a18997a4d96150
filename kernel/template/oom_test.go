package template

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

// TestForkedKernelTakesItsOOMScoreBeforeItsThreads launches a kernel through the template alone
// (no kernel.Start, whose RaiseOOMScore would set the score once the kernel is ready): the child
// raises its own oom_score_adj while it is one thread, so by the time it has threads the score is
// kernel.KernelOOMScoreAdj, and the launch's later call has nothing to write (a write to a process
// with threads walks every process on the host).
func TestForkedKernelTakesItsOOMScoreBeforeItsThreads(t *testing.T) {
	tp, spec := newProvisioner(t)
	dir := t.TempDir()
	argv := make([]string, len(spec.Argv))
	for i, a := range spec.Argv {
		argv[i] = strings.ReplaceAll(a, "{connection_file}", filepath.Join(dir, "kernel.json"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	proc, err := tp.Launch(ctx, kernel.LaunchSpec{Argv: argv, Dir: dir, RuntimeDir: dir, LogPath: filepath.Join(dir, "kernel.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Kill(); _ = proc.Cleanup() })
	if tp.Stats().Forks == 0 {
		t.Fatal("the kernel was not forked from the template")
	}
	pid := proc.PID()
	for threads(t, pid) < 2 {
		if ctx.Err() != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "kernel.log"))
			t.Fatalf("the kernel never started a thread; its log:\n%s", b)
		}
		time.Sleep(time.Millisecond)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(kernel.KernelOOMScoreAdj) {
		t.Fatalf("oom_score_adj of the forked kernel with threads: %s, want %d", got, kernel.KernelOOMScoreAdj)
	}
}

// threads is pid's thread count (/proc/PID/status), 0 when it cannot be read.
func threads(t *testing.T, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("the kernel is gone: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

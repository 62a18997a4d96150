package persistence_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// countingExecutor counts the requests an Install sends.
type countingExecutor struct {
	k     *kernel.Kernel
	evals int
}

func (c *countingExecutor) Eval(ctx context.Context, code, expr string) (string, error) {
	c.evals++
	return c.k.Eval(ctx, code, expr)
}

// TestInstallRidesItsCallsOnOneRequest: a kernel forked from a template that preloaded the agent is
// installed, pinged and given the caller's calls (here the output guard, whose cap then holds) in one
// request; a call that fails fails the install, naming it.
func TestInstallRidesItsCallsOnOneRequest(t *testing.T) {
	ctx := context.Background()
	k := startKernel(t, t.TempDir())
	forked := kernelParent(t, k) != os.Getpid()
	cp := newCheckpointer(t, filepath.Join(t.TempDir(), "db"))
	ex := &countingExecutor{k: k}
	var ok struct{ OK bool }
	guard := persistence.AgentCall{Op: "output_guard", Args: map[string]any{"cap": 3000}, Out: &ok}
	spool := t.TempDir()
	if err := cp.Install(ctx, ex, spool, spool, guard); err != nil {
		t.Fatal(err)
	}
	if want := 1; forked && ex.evals != want {
		t.Errorf("install of a forked kernel took %d requests, want %d", ex.evals, want)
	}
	if !ok.OK {
		t.Errorf("the output guard's answer did not reach its Out: %+v", ok)
	}
	var out strings.Builder
	if _, err := k.Execute(ctx, "print('x' * 20000)", kernel.ExecOptions{OnOutput: func(o kernel.Output) { out.WriteString(o.Text) }}); err != nil {
		t.Fatal(err)
	}
	if n := out.Len(); n > 3000+500 || !strings.Contains(out.String(), "xxx") {
		t.Errorf("a 20,000-character print came out as %d characters: the guard's cap of 3,000 does not hold", n)
	}
	err := cp.Install(ctx, ex, spool, spool, persistence.AgentCall{Op: "no_such_op"})
	if err == nil || !strings.Contains(err.Error(), "no_such_op") {
		t.Errorf("an install whose call fails: %v, want an error naming the call", err)
	}
}

package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/mock"
)

// echo is a CommandFn that writes its argv to stdout and exits with code.
func echo(code int, cpu time.Duration) func(context.Context, kernel.CommandSpec) (kernel.Process, error) {
	return func(_ context.Context, spec kernel.CommandSpec) (kernel.Process, error) {
		fmt.Fprint(spec.Stdout, strings.Join(spec.Argv, " "))
		fmt.Fprint(spec.Stderr, "warn")
		return mock.Exited(code).WithCPU(cpu), nil
	}
}

func TestExecRunsAndRecords(t *testing.T) {
	ctx := context.Background()
	s, store, prov := testService(t, func(c *Config) { c.CPUSecondCents = 2 })
	prov.CommandFn = echo(3, 1500*time.Millisecond)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	if _, err := s.PatchContext(ctx, "x", ContextRequest{EnvVars: map[string]string{"S": "1"}}); err != nil {
		t.Fatal(err)
	}
	res, err := handleOf(t, s, "x").RunCommand(ctx, CommandRequest{Command: []any{"ls", "dir x"}, WorkingDir: "/workspace/sub", Env: map[string]string{"R": "2"}}, CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "ls dir x" || res.Stderr != "warn" || res.ExitCode != 3 || res.TimedOut {
		t.Errorf("answer = %+v", res)
	}
	spec := prov.Commands()[0]
	if spec.Dir != s.cfg.hostPath("x", "sub") || spec.Workspace != s.cfg.workspace("x") || spec.Env["S"] != "1" || spec.Env["R"] != "2" {
		t.Errorf("command spec: dir %q workspace %q env %v", spec.Dir, spec.Workspace, spec.Env)
	}
	doc, _ := s.Get("x")
	if doc.State != carryover.StateRunning || doc.BudgetConsumed.Iterations != 1 || doc.ExecutionCount != 0 {
		t.Errorf("after exec: state %s iterations %d count %d", doc.State, doc.BudgetConsumed.Iterations, doc.ExecutionCount)
	}
	if doc.BudgetConsumed.CPUSeconds != 1.5 || doc.BudgetConsumed.CostCents != 3 {
		t.Errorf("cost: cpu %g cents %g, want 1.5 and 3", doc.BudgetConsumed.CPUSeconds, doc.BudgetConsumed.CostCents)
	}
	exs, _ := s.Executions(ctx, "x", 0)
	if len(exs) != 1 || exs[0].Kind != "exec" || exs[0].Code != "ls 'dir x'" || exs[0].Status != "error" {
		t.Fatalf("history = %+v", exs)
	}
	evs := store.EventTypes("x")
	if !slices.Equal(evs, []string{carryover.EventSessionStarted, carryover.EventExecStarted, carryover.EventExecCompleted}) {
		t.Errorf("events = %v", evs)
	}
}

func TestExecRefusals(t *testing.T) {
	ctx := context.Background()
	s, _, prov := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	for name, req := range map[string]CommandRequest{
		"timeout":  {Command: "true", TimeoutSeconds: ptr(0.0)},
		"too long": {Command: "true", TimeoutSeconds: ptr(601.0)},
		"env name": {Command: "true", Env: map[string]string{"A=B": "1"}},
		"env NUL":  {Command: "true", Env: map[string]string{"A": "\x00"}},
		"dotdot":   {Command: "true", WorkingDir: "../etc"},
		"outside":  {Command: "true", WorkingDir: "/etc"},
	} {
		if _, err := handleOf(t, s, "x").RunCommand(ctx, req, CommandOptions{}); carryover.ErrorCode(err) != carryover.CodeInvalid {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}
	if n := len(prov.Commands()); n != 0 {
		t.Fatalf("%d commands ran for refused requests", n)
	}
}

func ptr[T any](v T) *T { return &v }

func TestExecTimeoutKillsCommand(t *testing.T) {
	s, _, prov := testService(t, nil)
	p := mock.Hanging()
	prov.CommandFn = func(context.Context, kernel.CommandSpec) (kernel.Process, error) { return p, nil }
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	res, err := handleOf(t, s, "x").RunCommand(context.Background(), CommandRequest{Command: "sleep 99", TimeoutSeconds: ptr(0.05)}, CommandOptions{})
	wantCode(t, err, carryover.CodeTimeout)
	if carryover.ErrorOf(err).Result != res || res == nil || !res.TimedOut || res.ExitCode != 128+9 {
		t.Fatalf("answer %+v with the error's result %v", res, carryover.ErrorOf(err).Result)
	}
	if !p.Killed() {
		t.Fatal("the command was not killed at its timeout")
	}
}

// TestExecInterruptKillsCommand: an interrupt of the session kills its shell command in flight,
// whose answer says so; a delete does too, and its answer is not_found (the session is gone), and
// the delete does not wait for the command's timeout.
func TestExecInterruptKillsCommand(t *testing.T) {
	s, _, prov := testService(t, nil)
	procs := make(chan *mock.Process, 2)
	prov.CommandFn = func(context.Context, kernel.CommandSpec) (kernel.Process, error) {
		p := mock.Hanging()
		procs <- p
		return p, nil
	}
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	h := handleOf(t, s, "x")
	type answer struct {
		res *CommandResult
		err error
	}
	start := func() (<-chan answer, *mock.Process) {
		ch := make(chan answer, 1)
		go func() {
			res, err := h.RunCommand(context.Background(), CommandRequest{Command: "sleep 99", TimeoutSeconds: ptr(600.0)}, CommandOptions{})
			ch <- answer{res, err}
		}()
		return ch, <-procs
	}
	done, p := start()
	if err := h.Interrupt(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.res == nil || !a.res.Interrupted || a.res.ExitCode != 128+9 || !p.Killed() {
		t.Fatalf("interrupted command: %+v, %v (killed %v)", a.res, a.err, p.Killed())
	}
	done, p = start()
	if err := s.Delete(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	a = <-done
	wantCode(t, a.err, carryover.CodeNotFound)
	if carryover.ErrorOf(a.err).Result != a.res || a.res == nil || !a.res.Interrupted || !p.Killed() {
		t.Fatalf("command of a deleted session: %+v, %v", a.res, a.err)
	}
}

func TestExecCommandNotFound(t *testing.T) {
	s, _, prov := testService(t, nil)
	prov.CommandFn = func(context.Context, kernel.CommandSpec) (kernel.Process, error) {
		return nil, &kernel.StartError{Argv0: "nope", Err: errors.New("exec: nope: not found")}
	}
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	res, err := handleOf(t, s, "x").RunCommand(context.Background(), CommandRequest{Command: []any{"nope"}}, CommandOptions{})
	if err != nil || res.ExitCode != 127 || !strings.Contains(res.Stderr, "not found") {
		t.Fatalf("Exec = %+v, %v; want exit 127 with the reason", res, err)
	}
}

func TestExecRecordFailureIsInTheAnswer(t *testing.T) {
	s, store, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "x"})
	store.InsertExecutionFn = func(context.Context, carryover.Execution) (int64, error) { return 0, errors.New("db gone") }
	res, err := handleOf(t, s, "x").RunCommand(context.Background(), CommandRequest{Command: "true"}, CommandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.RecordError, "db gone") {
		t.Fatalf("record_error = %q, want the store's failure", res.RecordError)
	}
}

func TestBudgetIterationLimit(t *testing.T) {
	ctx := context.Background()
	s, store, prov := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "b", Budget: &carryover.Budget{IterationLimit: 5}})
	for i := 0; i < 5; i++ {
		if _, err := handleOf(t, s, "b").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{}); err != nil {
			t.Fatalf("exec %d: %v", i+1, err)
		}
	}
	_, err := handleOf(t, s, "b").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{})
	wantCode(t, err, carryover.CodeBudgetExceeded)
	if d := carryover.ErrorOf(err).Details; d["limit"] != "iteration_limit" || d["value"] != 5.0 || d["consumed"] != 5.0 {
		t.Errorf("details = %v", d)
	}
	if n := len(prov.Commands()); n != 5 {
		t.Errorf("%d commands ran, want 5", n)
	}
	var warnings, exceeded int
	for _, typ := range store.EventTypes("b") {
		switch typ {
		case carryover.EventBudgetWarning:
			warnings++
		case carryover.EventBudgetExceeded:
			exceeded++
		}
	}
	if warnings != 1 || exceeded != 1 {
		t.Errorf("budget_warning x%d budget_exceeded x%d, want one each (the warning at 4 of 5, once)", warnings, exceeded)
	}
	if doc, _ := s.Get("b"); !doc.Warned("budget_warned_iteration_limit") || doc.Warned("budget_warned_cost_cap_cents") {
		t.Errorf("budget_warned = %v, want the iteration limit's only", doc.BudgetWarned)
	}
}

func TestBudgetCostCap(t *testing.T) {
	ctx := context.Background()
	s, _, prov := testService(t, func(c *Config) { c.CPUSecondCents = 10 })
	prov.CommandFn = echo(0, 2*time.Second) // 20 cents a command
	mustCreate(t, s, CreateRequest{SessionID: "c", Budget: &carryover.Budget{CostCapCents: 30}})
	for i := 0; i < 2; i++ {
		if _, err := handleOf(t, s, "c").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{}); err != nil {
			t.Fatalf("exec %d: %v", i+1, err)
		}
	}
	_, err := handleOf(t, s, "c").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{})
	wantCode(t, err, carryover.CodeBudgetExceeded)
	if l := carryover.ErrorOf(err).Details["limit"]; l != "cost_cap_cents" {
		t.Fatalf("limit = %v", l)
	}
}

func TestBudgetDurationLimitCountsRunningTimeOnly(t *testing.T) {
	ctx := context.Background()
	s, _, _ := testService(t, nil)
	mustCreate(t, s, CreateRequest{SessionID: "d", Budget: &carryover.Budget{DurationLimitSeconds: 0.1}})
	time.Sleep(150 * time.Millisecond) // pending: the clock does not run
	if _, err := handleOf(t, s, "d").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{}); err != nil {
		t.Fatalf("the first command (the session was pending): %v", err)
	}
	time.Sleep(150 * time.Millisecond) // running: it does
	_, err := handleOf(t, s, "d").RunCommand(ctx, CommandRequest{Command: "true"}, CommandOptions{})
	wantCode(t, err, carryover.CodeBudgetExceeded)
	if l := carryover.ErrorOf(err).Details["limit"]; l != "duration_limit_seconds" {
		t.Fatalf("limit = %v", l)
	}
}

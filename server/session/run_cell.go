package session

// run_cell.go: one cell in the kernel with a deadline: outputs streamed to the answer, the active
// run and the subscribers; an interrupt at the timeout and a new kernel when it is ignored; the
// outcome turned into the answer's status and error.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/collect"
	"github.com/carryover/carryover/server/session/stream"
)

// runCode runs code with a timeout: past it the kernel is interrupted (state kept) and, if it does
// not stop within a grace period, restarted from the last checkpoint. ride, when it holds a prepared
// checkpoint, sends its snapshot request along and keeps the answer.
func (ls *Session) runCode(ctx context.Context, k *kernel.Kernel, code string, timeout time.Duration, hooks RunOptions, turn int, ride *snapshotRide) (*RunResult, error) {
	s := ls.svc
	res := &RunResult{ExecutionCount: turn, Outputs: []kernel.Output{}}
	col := &collect.Collector{Max: s.cfg.MaxOutputBytes}
	act := &activeRun{id: hooks.ID, code: code}
	ls.mu.Lock()
	ls.running = act
	ls.mu.Unlock()
	defer func() {
		ls.mu.Lock()
		ls.running = nil
		ls.mu.Unlock()
	}()
	opts := ls.cellOptions(act, col, code, hooks, ride)
	if md := ls.setupMetadata(k, code); md != nil {
		opts.Metadata = md
		status := opts.OnStatus
		opts.OnStatus = func(state string) {
			if state == "busy" {
				ls.forgetSetup(k)
			}
			status(state)
		}
	}
	start := time.Now()
	out := ls.runWithDeadline(ctx, k, code, opts, timeout)
	res.DurationMS = ms(time.Since(start))
	res.take(col.Finish())
	return res, runOutcome(res, out, ride, timeout)
}

// cellOptions streams outputs to the collector (the answer), the active run (clients joining
// mid-run) and the session's subscribers.
func (ls *Session) cellOptions(act *activeRun, col *collect.Collector, code string, hooks RunOptions, ride *snapshotRide) kernel.ExecOptions {
	captures := stream.OutputCaptures{When: ls.hub.HasComms} // what an Output widget captures is the widget's
	onOutput := func(o kernel.Output) {
		if f := captures.Frame(o); f != nil {
			ls.hub.BroadcastComms(f)
			return
		}
		if col.Add(o) {
			act.output(&ls.hub, o)
		}
	}
	opts := kernel.ExecOptions{
		StoreHistory: true,
		OnStart:      ls.cellStarted,
		OnComm:       captures.Watch,
		OnOutput:     onOutput,
		// busy goes out as the kernel says it; idle is sent after the result (see Run), so a client
		// that sees idle knows the turn, checkpoint included, is over.
		OnStatus: func(state string) {
			if state == "busy" {
				ls.hub.Broadcast(stream.StatusFrame{Type: "status", ID: hooks.ID, ExecutionState: state, Code: code})
			}
		},
	}
	if ride != nil && ride.prep != nil {
		opts.UserExpressions = map[string]string{snapshotKey: ride.prep.Expr}
	}
	switch {
	case hooks.stdin != nil:
		opts.OnInput = hooks.stdin.answer
	case hooks.AllowInput:
		opts.OnInput = func(ictx context.Context, req kernel.InputRequest) (string, error) {
			return act.askInput(ictx, &ls.hub, req)
		}
	}
	return opts
}

// cellOutcome is how the kernel's execution ended.
type cellOutcome struct {
	r         *kernel.ExecResult
	err       error
	timedOut  bool // the deadline passed and the kernel was interrupted
	restarted bool // ... and it ignored the interrupt, so it was replaced
}

// interruptGrace is how long a cell interrupted at its deadline may take to stop before its kernel
// is replaced.
const interruptGrace = 5 * time.Second

// runWithDeadline runs the cell, interrupting it at the timeout and replacing the kernel when it
// ignores the interrupt for interruptGrace.
func (ls *Session) runWithDeadline(ctx context.Context, k *kernel.Kernel, code string, opts kernel.ExecOptions, timeout time.Duration) cellOutcome {
	done, ended := make(chan cellOutcome, 1), make(chan struct{})
	started := watchStart(&opts)
	// The kernel keeps running if the HTTP client goes away: the turn is still recorded. ectx ends
	// with the run, which also releases an input() prompt nobody answered.
	ectx, ecancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ecancel()
	go func() {
		r, err := k.Execute(ectx, code, opts)
		close(ended)
		done <- cellOutcome{r: r, err: err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case out := <-done:
		return out
	case <-timer.C:
	}
	return ls.stopLate(ctx, k, started, ended, done)
}

// stopLate interrupts a cell past its deadline once the kernel has started it (started: its
// kernel.ExecOptions.OnStart): a kernel ignores an interrupt that arrives before, so a deadline that
// passes while the request still waits (a tiny timeout, a kernel busy starting) would otherwise end
// in a restart of a kernel that would have stopped. Once only: a second could land in the first's
// handling, except for a cell that started after its deadline: interrupted as it starts, it is
// interrupted once more if it still runs reinterruptAfter later (interruptAtStart says why). A
// cell still running interruptGrace after its deadline has its kernel replaced.
func (ls *Session) stopLate(ctx context.Context, k *kernel.Kernel, started, ended <-chan struct{}, done <-chan cellOutcome) cellOutcome {
	late := !isClosed(started)
	grace := time.NewTimer(interruptGrace)
	defer grace.Stop()
	select {
	case <-started:
	case out := <-done:
		return timedOut(out)
	case <-grace.C:
		return ls.replaceStuck(ctx, done)
	}
	if late {
		interruptAtStart(k, ended)
	} else {
		_ = k.Interrupt(context.WithoutCancel(ctx))
	}
	select {
	case out := <-done:
		return timedOut(out)
	case <-grace.C:
		return ls.replaceStuck(ctx, done)
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// timedOut marks out as past its deadline.
func timedOut(out cellOutcome) cellOutcome {
	out.timedOut = true
	return out
}

// replaceStuck replaces the kernel of a cell that did not stop within interruptGrace of its
// deadline (the session is restored from its last checkpoint) and answers the cell's outcome.
func (ls *Session) replaceStuck(ctx context.Context, done <-chan cellOutcome) cellOutcome {
	ls.svc.log.Warn("run ignored interrupt; restarting kernel", "session", ls.id)
	ls.releaseKernel(ctx, "run timeout ignored interrupt")
	out := <-done
	out.timedOut, out.restarted = true, true
	return out
}

// watchStart makes opts close the returned channel when the kernel says it started the cell.
func watchStart(opts *kernel.ExecOptions) <-chan struct{} {
	started := make(chan struct{})
	var once sync.Once
	onStart := opts.OnStart
	opts.OnStart = func() {
		once.Do(func() { close(started) })
		if onStart != nil {
			onStart()
		}
	}
	return started
}

// runOutcome fills the answer's status and error from how the execution ended, and keeps the
// snapshot answer that rode on it; it returns the run's error (kernel death, timeout), if any.
func runOutcome(res *RunResult, out cellOutcome, ride *snapshotRide, timeout time.Duration) error {
	if out.err != nil {
		res.Status = "error"
		if isDied(out.err) && !out.restarted { // our own restart of a run that ignored the interrupt is a timeout
			return &carryover.Error{Code: carryover.CodeKernelDied, Message: "the kernel died during the run; the session is restored from its last checkpoint", Err: out.err, Result: res}
		}
		if !out.timedOut {
			return out.err
		}
	} else {
		res.Status = out.r.Status
		if out.r.Status == "error" && res.Error == nil {
			res.Error = &RunError{EName: out.r.EName, EValue: out.r.EValue, Traceback: out.r.Traceback}
		}
		if ride != nil && ride.prep != nil && out.r.Status == "ok" {
			if text, err := kernel.UserExpressionText(out.r.UserExpressions[snapshotKey]); err == nil {
				ride.answer, ride.input = text, out.r.Input
			} else if out.timedOut {
				// The cell itself finished; the deadline interrupted only the snapshot riding on it,
				// which Finish takes again on its own. The run is not a timeout.
				out.timedOut = false
			}
		}
	}
	if !out.timedOut {
		return nil
	}
	msg := fmt.Sprintf("the run exceeded timeout_seconds=%g; the kernel was interrupted and its state kept", timeout.Seconds())
	if res.Status == "ok" { // the interrupt came as the cell ended, or its code caught it
		msg = fmt.Sprintf("the run exceeded timeout_seconds=%g, but the cell ended without an error (before the interrupt took effect, or its code caught it): its answer is in result", timeout.Seconds())
	}
	if out.restarted {
		msg = fmt.Sprintf("the run exceeded timeout_seconds=%g and ignored the interrupt; the kernel was restarted and the session restored from its last checkpoint", timeout.Seconds())
	}
	return (&carryover.Error{Code: carryover.CodeTimeout, Message: msg, Result: res}).
		WithDetails("timeout_seconds", timeout.Seconds(), "restarted", out.restarted)
}

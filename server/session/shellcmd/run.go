package shellcmd

// run.go: an exec request and its answer, and the command run through the provisioner and waited
// for (killed with its whole group or box at the timeout).

import (
	"context"
	"errors"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// Request is the body of POST /api/sessions/{id}/exec: argv, or a string run by /bin/sh -c.
type Request struct {
	Command        any               `json:"command"`
	WorkingDir     string            `json:"working_dir"`
	Env            map[string]string `json:"env"`
	TimeoutSeconds *float64          `json:"timeout_seconds"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"` // exactly-once under retries (server/session/idempotency.go)
}

// Result is the exec answer.
type Result struct {
	Stdout        string  `json:"stdout"`
	Stderr        string  `json:"stderr"`
	ExitCode      int     `json:"exit_code"`
	DurationMS    float64 `json:"duration_ms"`
	TimedOut      bool    `json:"timed_out,omitempty"`
	Interrupted   bool    `json:"interrupted,omitempty"` // killed by an interrupt of the session
	StdoutDropped int64   `json:"stdout_dropped_bytes,omitempty"`
	StderrDropped int64   `json:"stderr_dropped_bytes,omitempty"`
	// StdoutBase64 and StderrBase64 are the output's exact bytes when they are not UTF-8 (a binary
	// file catted, a legacy encoding): Stdout and Stderr, JSON strings, then carry U+FFFD for each
	// byte they could not hold. Absent for text.
	StdoutBase64 []byte `json:"stdout_base64,omitempty"`
	StderrBase64 []byte `json:"stderr_base64,omitempty"`
	RecordError  string `json:"record_error,omitempty"` // the command ran, but its record did not stick
}

// Env is a command's own environment: the session's env vars, then the request's.
func Env(doc carryover.Session, req Request) map[string]string {
	env := map[string]string{}
	for k, v := range doc.AgentContext.EnvVars {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	return env
}

// Bounds are what a command may take before it is cut.
type Bounds struct {
	MaxBytes int64           // of each output kept
	Timeout  time.Duration   // killed past it (Result.TimedOut)
	Stop     <-chan struct{} // killed when it closes (Result.Interrupted): the session was interrupted
}

// Run runs spec through p within b, and answers with its result and the CPU seconds it used.
// started is called once the command runs (not for one that could not start: its answer is exit
// code 127 with the reason). An error is p's refusal of the spec (limitErr makes it the API's).
func Run(ctx context.Context, p kernel.Provisioner, spec kernel.CommandSpec, b Bounds,
	limitErr func(error) error, started func()) (*Result, float64, error) {
	stdout, stderr := &Buffer{Max: b.MaxBytes}, &Buffer{Max: b.MaxBytes}
	spec.Stdout, spec.Stderr = stdout, stderr
	start := time.Now()
	proc, err := p.Command(ctx, spec)
	var startErr *kernel.StartError
	if err != nil && !errors.As(err, &startErr) {
		return nil, 0, limitErr(err)
	}
	started()
	res := &Result{}
	var cpu float64
	if startErr != nil {
		res.ExitCode, res.Stderr = 127, startErr.Error()
	} else {
		st := wait(proc, b, res)
		cpu = st.CPU.Seconds()
		res.Stdout, res.Stderr = stdout.Text(), stderr.Text()
		res.StdoutDropped, res.StderrDropped = stdout.Dropped(), stderr.Dropped()
		res.StdoutBase64, res.StderrBase64 = stdout.Binary(), stderr.Binary()
	}
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	return res, cpu, nil
}

// wait waits for p (killing its whole group or box at the timeout or the stop), sets the exit code
// and the timeout or interrupt flag of res, and releases p. Children left behind are killed too:
// nothing outlives the exec.
func wait(p kernel.Process, b Bounds, res *Result) kernel.ExitStatus {
	defer func() { _ = p.Cleanup() }()
	t := time.NewTimer(b.Timeout)
	defer t.Stop()
	select {
	case <-p.Exited():
	case <-t.C:
		res.TimedOut = true
		p.Kill()
		<-p.Exited()
	case <-b.Stop:
		res.Interrupted = true
		p.Kill()
		<-p.Exited()
	}
	st := p.ExitStatus()
	res.ExitCode = st.Code
	if st.Signal != 0 {
		res.ExitCode = 128 + int(st.Signal)
	}
	p.Kill()
	return st
}

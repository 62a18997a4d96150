package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
)

// RunRequest is the body of POST /api/sessions/{id}/run (and of a websocket "run").
type RunRequest struct {
	Code           string            `json:"code"`
	UpdateData     map[string]any    `json:"update_data"`
	TimeoutSeconds *float64          `json:"timeout_seconds"`
	Env            map[string]string `json:"env"`
}

// RunError is the error of a run whose code raised.
type RunError struct {
	EName     string   `json:"ename"`
	EValue    string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// RunResult is the /run answer.
type RunResult struct {
	SessionID       string                      `json:"session_id,omitempty"`
	ExecutionCount  int                         `json:"execution_count"`
	Status          string                      `json:"status"`
	Stdout          string                      `json:"stdout"`
	Stderr          string                      `json:"stderr"`
	Result          *string                     `json:"result"`
	Outputs         []kernel.Output             `json:"outputs"`
	Error           *RunError                   `json:"error"`
	DurationMS      float64                     `json:"duration_ms"`
	OutputTruncated int64                       `json:"output_dropped_bytes,omitempty"`
	Checkpoint      *carryover.CheckpointResult `json:"checkpoint,omitempty"`
	CheckpointError string                      `json:"checkpoint_error,omitempty"`
	RecordError     string                      `json:"record_error,omitempty"` // the turn ran, but its record did not stick
	// ProcessesEnded names the background processes that ended when the session's previous kernel
	// was stopped on purpose (rotation, hibernation, stop) since the last answer.
	ProcessesEnded []kernel.BackgroundProcess `json:"processes_ended,omitempty"`

	ride      *snapshotRide // the checkpoint that rode on the cell's execute_request
	lostOwner error         // the checkpoint was fenced: another node owns the session (cluster.go)
}

// RunOptions connect a run to the client that sent it.
type RunOptions struct {
	ID         string // the frames' id; "" gives run-<n>
	AllowInput bool   // input() prompts go to the session's subscribers (POST /run has none)
	// OnError gets the error of a run that ended in one (timeout, kernel death) after its result
	// and before the idle status, so a client waiting for idle has it by then.
	OnError func(error)
}

// activeRun is the run in flight; websocket clients that connect mid-run get its outputs so far,
// and its pending input() prompt, which any of the session's clients may answer.
type activeRun struct {
	mu      sync.Mutex
	id      string
	code    string
	outputs []kernel.Output
	prompt  *InputRequestFrame // the pending prompt, nil when none
	reply   chan string        // where an input_reply goes
}

// frameLocked is the "running" frame; the caller holds a.mu.
func (a *activeRun) frameLocked() RunningFrame {
	return RunningFrame{Type: "running", ID: a.id, Code: a.code, InputRequest: a.prompt,
		Outputs: append([]kernel.Output(nil), a.outputs...)}
}

// output keeps o for clients joining mid-run and streams it to the session's subscribers.
func (a *activeRun) output(h *hub, o kernel.Output) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outputs = append(a.outputs, o)
	h.broadcast(OutputFrame{Type: "output", ID: a.id, Output: o})
}

// answer delivers an input_reply for run id; it reports whether an input was pending.
func (a *activeRun) answer(id, value string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.prompt == nil || a.id != id {
		return false
	}
	select {
	case a.reply <- value:
		a.prompt = nil
		return true
	default:
		return false
	}
}

// askInput publishes an input() prompt to every client of the session and waits for one to answer.
func (a *activeRun) askInput(ctx context.Context, h *hub, req kernel.InputRequest) (string, error) {
	frame := &InputRequestFrame{Type: "input_request", ID: a.id, Prompt: req.Prompt, Password: req.Password}
	a.mu.Lock()
	a.prompt, a.reply = frame, make(chan string, 1)
	reply := a.reply
	h.broadcast(frame)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.prompt = nil
		a.mu.Unlock()
	}()
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// collector builds the run answer from outputs as they stream, capping what it keeps.
type collector struct {
	max     int64
	kept    int64
	dropped int64
	res     *RunResult
	stdout  strings.Builder
	stderr  strings.Builder
}

func outputSize(o kernel.Output) int64 {
	n := int64(len(o.Text)) + int64(len(o.EValue))
	for _, v := range o.Data {
		n += int64(len(v))
	}
	for _, t := range o.Traceback {
		n += int64(len(t))
	}
	return n
}

// add records one output; it reports whether it was kept (over the cap it is dropped, counted, and
// the answer says so).
func (c *collector) add(o kernel.Output) bool {
	size := outputSize(o)
	if c.kept+size > c.max && o.Type != "error" {
		c.dropped += size
		return false
	}
	c.kept += size
	switch o.Type {
	case "stream":
		if o.Name == "stderr" {
			c.stderr.WriteString(o.Text)
		} else {
			c.stdout.WriteString(o.Text)
		}
		// Merge consecutive chunks of one stream, as notebooks do.
		if n := len(c.res.Outputs); n > 0 && c.res.Outputs[n-1].Type == "stream" && c.res.Outputs[n-1].Name == o.Name {
			c.res.Outputs[n-1].Text += o.Text
			return true
		}
	case "execute_result":
		if raw, ok := o.Data["text/plain"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				c.res.Result = &s
			}
		}
	case "error":
		c.res.Error = &RunError{EName: o.EName, EValue: o.EValue, Traceback: o.Traceback}
	}
	c.res.Outputs = append(c.res.Outputs, o)
	return true
}

func (c *collector) finish() {
	c.res.Stdout, c.res.Stderr = c.stdout.String(), c.stderr.String()
	if c.dropped > 0 {
		c.res.OutputTruncated = c.dropped
		notice := fmt.Sprintf("\n[carryover: %d bytes of output dropped over run.max_output_bytes=%d]\n", c.dropped, c.max)
		c.res.Stderr += notice
		c.res.Outputs = append(c.res.Outputs, kernel.Output{Type: "stream", Name: "stderr", Text: notice})
	}
}

// Run executes code in the session's kernel, streams outputs to the session's subscribers,
// checkpoints the turn and records it.
func (s *Service) Run(ctx context.Context, id string, req RunRequest, opts RunOptions) (*RunResult, error) {
	ls, err := s.get(id)
	if err != nil {
		return nil, err
	}
	timeout, err := s.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	if err := carryover.ValidateCode(req.Code); err != nil {
		return nil, err
	}
	if err := carryover.ValidateEnv(req.Env, "env"); err != nil {
		return nil, err
	}
	end, err := s.beginTurn(ctx, ls)
	if err != nil {
		return nil, err
	}
	defer end()
	// The cell can carry a new session's set-up unless a per-run env request goes first (or IPython
	// would skip the hook: a blank cell).
	k, err := s.ensureKernelFor(ctx, ls, len(req.Env) == 0 && strings.TrimSpace(req.Code) != "", req.Env)
	if err != nil {
		return nil, err
	}
	if opts.ID == "" {
		s.mu.Lock()
		s.runSeq++
		opts.ID = fmt.Sprintf("run-%d", s.runSeq)
		s.mu.Unlock()
	}
	if len(req.Env) > 0 {
		if err := s.setEnv(ctx, k, req.Env); err != nil {
			return nil, err
		}
	}
	res, runErr := s.runCell(ctx, ls, k, req, timeout, opts)
	s.checkpointTurn(ctx, ls, k, res, runErr)
	res.ProcessesEnded = ls.takeEnded() // after checkpointTurn: a death during this run ended some
	if runErr == nil {
		runErr = lostDuring(ls, res) // another node owns the session now: this turn is not there (cluster.go)
	}
	status := res.Status
	if runErr != nil {
		status = string(carryover.ErrorOf(runErr).Code)
	}
	runsTotal.WithLabelValues(status).Inc()
	runSeconds.Observe(res.DurationMS / 1000)
	if err := s.endTurn(ctx, ls, turnRecord{kind: "run", code: req.Code, count: res.ExecutionCount, advance: true,
		status: status, answer: res, durationMS: res.DurationMS, updateData: req.UpdateData}); err != nil {
		res.RecordError = err.Error()
	}
	ls.hub.broadcast(ResultFrame{Type: "result", ID: opts.ID, Result: res})
	if runErr != nil && opts.OnError != nil {
		opts.OnError(runErr)
	}
	ls.hub.broadcast(StatusFrame{Type: "status", ID: opts.ID, ExecutionState: "idle"})
	return res, runErr
}

// runCell executes the cell with the turn's snapshot riding on it; per-run env vars (set by the
// caller) are put back afterwards.
func (s *Service) runCell(ctx context.Context, ls *liveSession, k *kernel.Kernel, req RunRequest, timeout time.Duration, opts RunOptions) (*RunResult, error) {
	turn := ls.snapshot().ExecutionCount + 1
	ride := &snapshotRide{}
	if len(req.Env) == 0 { // with per-run env the snapshot must come after the env is put back
		if p, err := s.ckpt.Prepare(ctx, ls.id); err == nil {
			ride.prep = p
		} else {
			s.log.Warn("checkpoint not prepared; it will be taken separately", "session", ls.id, "err", err)
		}
	}
	res, runErr := s.execute(ctx, ls, k, req.Code, timeout, opts, turn, ride)
	res.SessionID = ls.id
	res.ride = ride
	if len(req.Env) > 0 && runErr == nil {
		if err := s.unsetEnv(ctx, k, req.Env, ls.snapshot().AgentContext.EnvVars); err != nil {
			s.log.Warn("per-run env vars not reset", "session", ls.id, "err", err)
		}
	}
	return res, runErr
}

// snapshotRide carries the turn's checkpoint request on the cell's own execute_request (a user
// expression the kernel evaluates right after the cell) and brings back the agent's answer: one
// round trip per turn instead of two.
type snapshotRide struct {
	prep   *persistence.Prepared
	answer string // "" when the expression did not run (the cell raised) or failed
}

// snapshotKey names the ride's user expression in the execute_request.
const snapshotKey = "__carryover_snapshot__"

// execute runs code with a timeout: past it the kernel is interrupted (state kept) and, if it does
// not stop within a grace period, restarted from the last checkpoint. ride, when it holds a prepared
// checkpoint, sends its snapshot request along and keeps the answer.
func (s *Service) execute(ctx context.Context, ls *liveSession, k *kernel.Kernel, code string, timeout time.Duration, hooks RunOptions, turn int, ride *snapshotRide) (*RunResult, error) {
	res := &RunResult{ExecutionCount: turn, Outputs: []kernel.Output{}}
	col := &collector{max: s.cfg.MaxOutputBytes, res: res}
	act := &activeRun{id: hooks.ID, code: code}
	ls.mu.Lock()
	ls.running = act
	ls.mu.Unlock()
	defer func() {
		ls.mu.Lock()
		ls.running = nil
		ls.mu.Unlock()
	}()
	opts := s.execOptions(ls, act, col, code, hooks, ride)
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
	out := s.executeWithin(ctx, ls, k, code, opts, timeout)
	res.DurationMS = ms(time.Since(start))
	col.finish()
	return res, s.runOutcome(res, out, ride, timeout)
}

// execOptions streams outputs to the collector (the answer), the active run (clients joining
// mid-run) and the session's subscribers.
func (s *Service) execOptions(ls *liveSession, act *activeRun, col *collector, code string, hooks RunOptions, ride *snapshotRide) kernel.ExecOptions {
	opts := kernel.ExecOptions{
		StoreHistory: true,
		OnOutput: func(o kernel.Output) {
			if col.add(o) {
				act.output(&ls.hub, o)
			}
		},
		// busy goes out as the kernel says it; idle is sent after the result (see Run), so a client
		// that sees idle knows the turn, checkpoint included, is over.
		OnStatus: func(state string) {
			if state == "busy" {
				ls.hub.broadcast(StatusFrame{Type: "status", ID: hooks.ID, ExecutionState: state, Code: code})
			}
		},
	}
	if ride != nil && ride.prep != nil {
		opts.UserExpressions = map[string]string{snapshotKey: ride.prep.Expr}
	}
	if hooks.AllowInput {
		opts.OnInput = func(ictx context.Context, req kernel.InputRequest) (string, error) {
			return act.askInput(ictx, &ls.hub, req)
		}
	}
	return opts
}

// execOutcome is how the kernel's execution ended.
type execOutcome struct {
	r         *kernel.ExecResult
	err       error
	timedOut  bool // the deadline passed and the kernel was interrupted
	restarted bool // ... and it ignored the interrupt, so it was replaced
}

// executeWithin runs the cell, interrupting it at the timeout and replacing the kernel when it
// ignores the interrupt for 5 s.
func (s *Service) executeWithin(ctx context.Context, ls *liveSession, k *kernel.Kernel, code string, opts kernel.ExecOptions, timeout time.Duration) execOutcome {
	done := make(chan execOutcome, 1)
	// The kernel keeps running if the HTTP client goes away: the turn is still recorded. ectx ends
	// with the run, which also releases an input() prompt nobody answered.
	ectx, ecancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ecancel()
	go func() {
		r, err := k.Execute(ectx, code, opts)
		done <- execOutcome{r: r, err: err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case out := <-done:
		return out
	case <-timer.C:
	}
	_ = k.Interrupt(context.WithoutCancel(ctx))
	select {
	case out := <-done:
		out.timedOut = true
		return out
	case <-time.After(5 * time.Second):
	}
	// The interrupt did not stop it: restart the kernel and restore the last checkpoint.
	s.log.Warn("run ignored interrupt; restarting kernel", "session", ls.id)
	s.releaseKernel(ctx, ls, "run timeout ignored interrupt")
	out := <-done
	out.timedOut, out.restarted = true, true
	return out
}

// runOutcome fills the answer's status and error from how the execution ended, and keeps the
// snapshot answer that rode on it; it returns the run's error (kernel death, timeout), if any.
func (s *Service) runOutcome(res *RunResult, out execOutcome, ride *snapshotRide, timeout time.Duration) error {
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
				ride.answer = text
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
	if out.restarted {
		msg = fmt.Sprintf("the run exceeded timeout_seconds=%g and ignored the interrupt; the kernel was restarted and the session restored from its last checkpoint", timeout.Seconds())
	}
	return (&carryover.Error{Code: carryover.CodeTimeout, Message: msg, Result: res}).
		WithDetails("timeout_seconds", timeout.Seconds(), "restarted", out.restarted)
}

// checkpointTurn saves the turn's namespace and files, or, when the kernel died or was replaced,
// brings the session back from its last checkpoint. A failed checkpoint is in the answer
// (checkpoint_error) and the event log; the run itself stands.
func (s *Service) checkpointTurn(ctx context.Context, ls *liveSession, k *kernel.Kernel, res *RunResult, runErr error) {
	ctx = context.WithoutCancel(ctx)
	died := runErr != nil && carryover.ErrorOf(runErr).Code == carryover.CodeKernelDied
	if died || ls.currentKernel() == nil {
		// Counted before the new kernel is prepared, so its execution counter continues from here.
		if _, err := s.update(ctx, ls, func(d *carryover.Session) error { d.ExecutionCount = res.ExecutionCount; return nil }); err != nil {
			s.log.Error("execution count not saved", "session", ls.id, "err", err)
		}
	}
	if died {
		s.dropDeadKernel(ctx, ls, k)
	}
	cur := ls.currentKernel()
	if cur == nil {
		// Died, or restarted after ignoring an interrupt: restore the last checkpoint now.
		if _, err := s.ensureKernel(ctx, ls); err != nil {
			s.log.Error("restore after the kernel's loss failed", "session", ls.id, "err", err)
		}
		return
	}
	ride := res.ride
	if cur != k || ride == nil {
		ride = &snapshotRide{} // prepared for another kernel: take a fresh one
	}
	cp, err := s.checkpointWith(ctx, ls, cur, res.ExecutionCount, ride.prep, ride.answer)
	if err != nil {
		res.lostOwner = lostOwnership(ls.id, err, res)
		res.CheckpointError = err.Error()
		s.log.Error("checkpoint failed", "session", ls.id, "err", err)
		s.emit(ctx, ls, carryover.EventCheckpointFailed, map[string]any{"turn": res.ExecutionCount, "error": err.Error()})
	}
	res.Checkpoint = cp
}

// currentKernel returns the session's kernel (nil when none).
func (ls *liveSession) currentKernel() *kernel.Kernel {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.kern
}

// runTimeout validates timeout_seconds.
func (s *Service) runTimeout(t *float64) (time.Duration, error) {
	if t == nil {
		return s.cfg.DefaultRunTimeout, nil
	}
	if *t <= 0 || *t > s.cfg.MaxRunTimeoutSeconds {
		return 0, carryover.Errorf(carryover.CodeInvalid, "timeout_seconds must be > 0 and <= %g", s.cfg.MaxRunTimeoutSeconds).WithDetails("field", "timeout_seconds")
	}
	return secs(*t), nil
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

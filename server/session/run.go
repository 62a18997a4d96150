package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/idempotency"
	"github.com/carryover/carryover/server/session/agentops"
	"github.com/carryover/carryover/server/session/collect"
	"github.com/carryover/carryover/server/session/stream"
)

// RunRequest is the body of POST /api/sessions/{id}/run (and of a websocket "run").
type RunRequest struct {
	Code           string            `json:"code"`
	UpdateData     map[string]any    `json:"update_data"`
	TimeoutSeconds *float64          `json:"timeout_seconds"`
	Env            map[string]string `json:"env"`
	// IdempotencyKey makes the run exactly-once under retries (idempotency.go); the front doors
	// fill it from the Idempotency-Key header or the body's field.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Stdin, when set, is what the cell's input() reads: a line per call, EOFError past its end
	// (stdin.go). It answers before any client is asked (a websocket's input_request).
	Stdin *string `json:"stdin,omitempty"`
}

// RunError is the error of a run whose code raised.
type RunError = collect.Error

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
	// Restore is the report of the restore since the last answer (a kernel's death or a wake restored
	// the last checkpoint, a checkpoint was restored): what replay rebuilt and what it could not.
	Restore *carryover.RestoreReport `json:"restore,omitempty"`

	ride      *snapshotRide // the checkpoint that rode on the cell's execute_request
	lostOwner error         // the checkpoint was fenced: another node owns the session (cluster.go)
}

// take puts a run's collected outputs (package collect) into its answer.
func (res *RunResult) take(a collect.Answer) {
	res.Stdout, res.Stderr, res.Result, res.Outputs, res.OutputTruncated = a.Stdout, a.Stderr, a.Result, a.Outputs, a.Dropped
	if a.Error != nil {
		res.Error = a.Error
	}
}

// RunOptions connect a run to the client that sent it.
type RunOptions struct {
	ID         string // the frames' id; "" gives run-<n>
	AllowInput bool   // input() prompts go to the session's subscribers (POST /run has none)
	// OnError gets the error of a run that ended in one (timeout, kernel death) after its result
	// and before the idle status, so a client waiting for idle has it by then.
	OnError func(error)
	// Queued, when set, is called once the run holds its place in the session's line of runs (it
	// is not called for a run refused before it got there). A front door that must run a client's
	// requests in the order it sent them (the websocket's run frames) waits for it, or for Run to
	// return, before it starts the next.
	Queued func()
	// OnReplay is called when the answer is the stored one of an earlier attempt with the same
	// idempotency key (the front doors say so: the Idempotent-Replayed header; the websocket sends
	// the frames itself).
	OnReplay func()

	started func() error // a keyed run's: called just before its code starts (idempotency.go)
	stdin   *stdinLines  // the request's stdin, answering input() (stdin.go)
}

// Run executes code in the session's kernel, streams outputs to the session's subscribers,
// checkpoints the turn and records it.
func (ls *Session) Run(ctx context.Context, req RunRequest, opts RunOptions) (*RunResult, error) {
	s := ls.svc
	if key := req.IdempotencyKey; key != "" {
		req.IdempotencyKey = ""
		return runKeyed(ctx, ls, "run", key, req, opts.OnReplay, func(ctx context.Context, started func() error) (*RunResult, error) {
			opts.started = started
			return ls.Run(ctx, req, opts)
		})
	}
	timeout, err := s.cfg.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	if err := carryover.ValidateCode(req.Code); err != nil {
		return nil, err
	}
	if err := carryover.ValidateEnv(req.Env, "env"); err != nil {
		return nil, err
	}
	// The turn's writes (a new kernel's statuses and events, the checkpoint, the session, the
	// history) are flushed to disk once, before its answer leaves or its error returns (syncTurn),
	// not one by one (carryover.DeferSync).
	tctx := carryover.DeferSync(ctx)
	ct, cellEnded := newCellTurn()
	end, err := ls.beginTurnAs(tctx, opts.Queued, ct) // Interrupt waits for its cell (control.go)
	if err != nil {
		return nil, ls.syncFailed(ctx, err)
	}
	defer end()
	// The cell can carry a new session's set-up unless a per-run env request goes first (or IPython
	// would skip the hook: a blank cell).
	k, err := ls.ensureKernelWith(tctx, ensureOpts{firstCell: len(req.Env) == 0 && strings.TrimSpace(req.Code) != "", runEnv: req.Env})
	if err != nil {
		return nil, ls.syncFailed(ctx, err)
	}
	if opts.ID == "" {
		opts.ID = s.nextRunID()
	}
	opts.stdin = stdinOf(req.Stdin)
	if len(req.Env) > 0 {
		if err := agentops.SetEnv(ctx, k, req.Env); err != nil {
			return nil, ls.syncFailed(ctx, err)
		}
	}
	if opts.started != nil { // a keyed run's code starts: its key is kept whatever happens next
		if err := opts.started(); err != nil {
			return nil, ls.syncFailed(ctx, err)
		}
	}
	res, runErr := ls.runCell(tctx, k, req, timeout, opts)
	cellEnded()
	if gone := deletedDuring(ls, res); gone != nil {
		runErr = gone // no checkpoint: the session's rows go with it
	} else {
		ls.checkpointTurn(tctx, k, res, runErr)
	}
	res.ProcessesEnded = ls.notes.TakeEnded() // after checkpointTurn: a death during this run ended some
	res.Restore = ls.notes.TakeRestored()
	runErr = lostDuring(ls, res, runErr) // another node may own the session now (cluster.go)
	status := res.Status
	if runErr != nil {
		status = string(carryover.ErrorOf(runErr).Code)
	}
	s.m.Runs.WithLabelValues(status).Inc()
	s.m.RunSeconds.Observe(res.DurationMS / 1000)
	if err := ls.endTurn(tctx, turnRecord{kind: "run", code: req.Code, count: res.ExecutionCount, advance: true,
		status: status, answer: res, durationMS: res.DurationMS, updateData: req.UpdateData}); err != nil {
		res.RecordError = recordError(ls, res, err)
	}
	idempotency.Settle(tctx, res, runErr) // a keyed run's answer is stored among the turn's writes
	if err := ls.syncTurn(ctx); err != nil {
		res.RecordError = strings.TrimPrefix(res.RecordError+"; "+err.Error(), "; ")
	}
	ls.hub.Broadcast(ResultFrame{Type: "result", ID: opts.ID, Result: res})
	if runErr != nil && opts.OnError != nil {
		opts.OnError(runErr)
	}
	ls.hub.Broadcast(stream.StatusFrame{Type: "status", ID: opts.ID, ExecutionState: "idle"})
	return res, runErr
}

// nextRunID is the id of a run whose front door gave none.
func (s *Service) nextRunID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runSeq++
	return fmt.Sprintf("run-%d", s.runSeq)
}

// runCell executes the cell with the turn's snapshot riding on it; per-run env vars (set by the
// caller) are put back afterwards.
func (ls *Session) runCell(ctx context.Context, k *kernel.Kernel, req RunRequest, timeout time.Duration, opts RunOptions) (*RunResult, error) {
	s := ls.svc
	turn := ls.docCopy().ExecutionCount + 1
	ride := &snapshotRide{}
	if len(req.Env) == 0 { // with per-run env the snapshot must come after the env is put back
		if p, err := s.ckpt.Prepare(ctx, ls.id); err == nil {
			ride.prep = p
		} else {
			s.log.Warn("checkpoint not prepared; it will be taken separately", "session", ls.id, "err", err)
		}
	}
	res, runErr := ls.runCode(ctx, k, req.Code, timeout, opts, turn, ride)
	res.SessionID = ls.id
	res.ride = ride
	if len(req.Env) > 0 && runErr == nil {
		if err := agentops.UnsetEnv(ctx, k, req.Env, ls.docCopy().AgentContext.EnvVars); err != nil {
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
	input  uint64 // the kernel's input count with the cell's request (saved.go)
}

// snapshotKey names the ride's user expression in the execute_request.
const snapshotKey = "__carryover_snapshot__"

// checkpointTurn saves the turn's namespace and files, or, when the kernel died or was replaced,
// brings the session back from its last checkpoint. A failed checkpoint is in the answer
// (checkpoint_error) and the event log; the run itself stands.
func (ls *Session) checkpointTurn(ctx context.Context, k *kernel.Kernel, res *RunResult, runErr error) {
	s := ls.svc
	ctx = context.WithoutCancel(ctx)
	died := runErr != nil && carryover.ErrorOf(runErr).Code == carryover.CodeKernelDied
	if died || ls.currentKernel() == nil {
		// Counted before the new kernel is prepared, so its execution counter continues from here.
		if _, err := ls.update(ctx, func(d *carryover.Session) error { d.ExecutionCount = res.ExecutionCount; return nil }); err != nil {
			s.log.Error("execution count not saved", "session", ls.id, "err", err)
		}
	}
	if died {
		ls.dropDeadKernel(ctx, k)
	}
	cur := ls.currentKernel()
	if cur == nil {
		// Died, or restarted after ignoring an interrupt: restore the last checkpoint now.
		if _, err := ls.ensureKernel(ctx); err != nil {
			s.log.Error("restore after the kernel's loss failed", "session", ls.id, "err", err)
		}
		return
	}
	ride := res.ride
	if cur != k || ride == nil {
		ride = &snapshotRide{} // prepared for another kernel: take a fresh one
	}
	cp, err := ls.checkpointWith(ctx, cur, res.ExecutionCount, ride.prep, ride.answer, true) // endTurn saves the pointer
	if ride.answer == "" || err != nil {
		ls.markSaved(nil, 0, nil) // taken apart from the cell (or not at all): no exact mark
	} else {
		ls.markSaved(cur, ride.input, cp)
	}
	if err != nil {
		err = s.kern.DiskNote(ls.id, err)
		res.lostOwner = lostOwnership(ls.id, err, res)
		res.CheckpointError = err.Error()
		s.log.Error("checkpoint failed", "session", ls.id, "err", err)
		ls.emit(ctx, carryover.EventCheckpointFailed, map[string]any{"turn": res.ExecutionCount, "error": err.Error()})
	}
	res.Checkpoint = cp
}

// currentKernel returns the session's kernel (nil when none).
func (ls *Session) currentKernel() *kernel.Kernel {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.kern
}

// runTimeout validates timeout_seconds.
func (c Config) runTimeout(t *float64) (time.Duration, error) {
	if t == nil {
		return c.DefaultRunTimeout, nil
	}
	if *t <= 0 || *t > c.MaxRunTimeoutSeconds {
		return 0, carryover.Errorf(carryover.CodeInvalid, "timeout_seconds must be > 0 and <= %g", c.MaxRunTimeoutSeconds).WithDetails("field", "timeout_seconds")
	}
	return secs(*t), nil
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

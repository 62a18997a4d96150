package session

// jupyter.go is the session side of the Jupyter front door (server/jupyter): a Jupyter client's
// execute_request runs as one of the session's turns (the run lock in arrival order, admission and
// budget, the checkpoint riding on the request, the record), while the request and the kernel's
// answers stay raw Jupyter messages, so the client sees exactly what the kernel said. Everything
// else a Jupyter client sends (complete, inspect, comms, input_reply...) goes to Kernel's kernel
// directly.

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/collect"
	"github.com/carryover/carryover/server/session/rawexec"
	"github.com/carryover/carryover/server/session/stream"
)

// RawTurnOptions connect the turn to the front door.
type RawTurnOptions struct {
	// OnKernel gets the kernel the request goes to before it is sent, so the front door can
	// subscribe to its channels first (a new kernel after a death, hibernation or rotation).
	OnKernel func(*kernel.Kernel)
	// Record, when set, gets the turn's end before it is recorded and returns what to merge into the
	// session's data in the same write as the turn (nil: nothing). The front door keeps there which
	// requests were answered: a record written after the reply could be lost to a kill -9 between
	// the two, and the next process would take an answered request for a lost one.
	Record func(*rawexec.Turn) map[string]any
}

// RunRaw runs a Jupyter execute_request (shell) as a turn of the session. It returns when the turn is
// over, checkpoint committed and record written: the caller sends the reply and the idle status
// then, so "idle" in any Jupyter client means the turn survives a kill -9.
func (ls *Session) RunRaw(ctx context.Context, req kernel.RawMessage, opts RawTurnOptions) (*rawexec.Turn, error) {
	s := ls.svc
	c, msgID, err := rawexec.Parse(&req)
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx) // a client that goes away does not undo its turn
	end, err := ls.beginTurn(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer end()
	k, err := ls.ensureKernel(ctx)
	if err != nil {
		return nil, err
	}
	if opts.OnKernel != nil {
		opts.OnKernel(k)
	}
	ride := &snapshotRide{}
	if p, perr := s.ckpt.Prepare(ctx, ls.id); perr == nil {
		ride.prep = p
		if req.Content, err = rawexec.WithUserExpression(req.Content, snapshotKey, p.Expr); err != nil {
			return nil, carryover.Errorf(carryover.CodeInvalid, "execute_request content: %v", err)
		}
	}
	res := &RunResult{SessionID: ls.id, Status: "error", Outputs: []kernel.Output{}, ride: ride}
	// The client gets the outputs raw from the bridge; the turn's record keeps them too, as a run's
	// does, so the history and the notebook export show what the cell printed.
	col := &collect.Collector{Max: s.cfg.MaxOutputBytes}
	shown := ls.showRawTurn(msgID, c)
	turn, durationMS := rawexec.SendAndWait(ctx, s.log, k, msgID, req, func(o kernel.Output) {
		if col.Add(o) && shown != nil {
			shown.output(&ls.hub, o)
		}
	})
	res.take(col.Finish())
	res.DurationMS = durationMS
	advance := !c.Silent && (c.StoreHistory == nil || *c.StoreHistory)
	runErr := rawOutcome(turn, res, ls.docCopy().ExecutionCount, advance)
	ls.checkpointTurn(ctx, k, res, runErr)
	turn.CheckpointErr = res.CheckpointError
	res.Restore = ls.notes.TakeRestored() // in the turn's record; not told again to a later /run
	turn.Restore = res.Restore
	var data map[string]any
	if opts.Record != nil {
		data = opts.Record(turn)
	}
	status := res.Status
	if runErr != nil {
		status = string(carryover.CodeKernelDied)
	}
	s.m.Runs.WithLabelValues(status).Inc()
	if err := ls.endTurn(ctx, turnRecord{kind: "run", code: c.Code, count: res.ExecutionCount, advance: advance,
		status: status, answer: res, durationMS: res.DurationMS, updateData: data}); err != nil {
		s.log.Warn("jupyter turn not fully recorded", "session", ls.id, "err", err)
		turn.RecordErr = err.Error()
	}
	ls.endRawTurn(shown, res)
	return turn, nil
}

// rawOutcome fills res from how a Jupyter turn ended (count: the session's execution count before
// it); its error is the turn's when the kernel died.
func rawOutcome(turn *rawexec.Turn, res *RunResult, count int, advance bool) error {
	var runErr error
	switch {
	case turn.Died:
		res.ExecutionCount = count
		if advance {
			res.ExecutionCount++
		}
		runErr = &carryover.Error{Code: carryover.CodeKernelDied, Message: "the kernel died during the run; the session is restored from its last checkpoint"}
		res.ride.prep = nil
	case turn.ReplyLost: // the cell ran; the checkpoint takes its own snapshot (no answer rode back)
		res.ExecutionCount = count
		if advance {
			res.ExecutionCount++
		}
		res.Error = &RunError{EName: "KeyboardInterrupt", EValue: kernel.LostReplyMessage}
	default:
		res.Status, res.ExecutionCount = rawexec.ReplyStatus(turn.Reply)
		res.ride.answer = rawexec.StripUserExpression(turn.Reply, snapshotKey)
	}
	turn.ExecutionCount = res.ExecutionCount
	return runErr
}

// showRawTurn makes a Jupyter client's visible (not silent) turn a run the session's own clients see
// too, as they see each other's: a busy status with the code, its outputs, its result, then idle,
// under the run id "jupyter-<msg_id>"; a client joining mid-turn gets it in its "running" frame. So
// the UI shows a JupyterLab user's cells as they run. Nil for a silent request (JupyterLab's own
// inspections), which stays between the Jupyter client and the kernel.
func (ls *Session) showRawTurn(msgID string, c rawexec.Content) *activeRun {
	if c.Silent {
		return nil
	}
	act := &activeRun{id: "jupyter-" + msgID, code: c.Code}
	ls.mu.Lock()
	ls.running = act
	ls.mu.Unlock()
	ls.hub.Broadcast(stream.StatusFrame{Type: "status", ID: act.id, ExecutionState: "busy", Code: c.Code})
	return act
}

// endRawTurn ends what showRawTurn began: the result, then idle (the turn, checkpoint included, is over).
func (ls *Session) endRawTurn(act *activeRun, res *RunResult) {
	if act == nil {
		return
	}
	ls.mu.Lock()
	if ls.running == act {
		ls.running = nil
	}
	ls.mu.Unlock()
	ls.hub.Broadcast(ResultFrame{Type: "result", ID: act.id, Result: res})
	ls.hub.Broadcast(stream.StatusFrame{Type: "status", ID: act.id, ExecutionState: "idle"})
}

// Kernel returns the session's kernel for messages that are not turns (complete, inspect, comms,
// input replies), starting one (and restoring the last checkpoint) when it has none.
func (ls *Session) Kernel(ctx context.Context) (*kernel.Kernel, error) {
	if k := ls.currentKernel(); k != nil {
		select {
		case <-k.Dead():
		default:
			return k, nil
		}
	}
	end, err := ls.beginTurn(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer end()
	return ls.ensureKernel(ctx)
}

// LiveKernel returns the session's kernel when it has a live one, nil otherwise (none yet, dead, or
// being restored by the turn holding the session's line). It neither waits nor starts one: the
// Jupyter door's control and stdin channels must reach the kernel of the cell in flight.
func (ls *Session) LiveKernel() *kernel.Kernel {
	k := ls.currentKernel()
	if k == nil {
		return nil
	}
	select {
	case <-k.Dead():
		return nil
	default:
		return k
	}
}

// SendInLine sends a Jupyter client's shell request that is not an execute_request (kernel_info,
// complete, inspect, comm messages...) to the session's kernel in its place in the session's line
// of turns, as the kernel itself takes shell requests one at a time: after the turns before it
// (their checkpoints included), never to a kernel that a rotation, hibernation or restart is
// replacing at that moment, and restoring the last checkpoint first when the session has no live
// kernel (admitted as a turn is, then: a paused or closed session is not woken). onKernel gets the
// kernel before the request goes, so the door listens for the reply.
func (ls *Session) SendInLine(ctx context.Context, msg kernel.RawMessage, onKernel func(*kernel.Kernel)) error {
	if err := ls.lock.Lock(ctx); err != nil {
		return err
	}
	defer ls.lock.Unlock()
	k := ls.LiveKernel()
	if k == nil {
		if err := ls.admit(ctx); err != nil {
			return err
		}
		live, err := ls.ensureKernel(ctx)
		if err != nil {
			return err
		}
		k = live
	}
	if onKernel != nil {
		onKernel(k)
	}
	return k.SendRaw(ctx, msg.Channel, msg)
}

// RestartFresh is Jupyter's restart: a new kernel with an empty namespace and the execution count
// back at 1, the workspace files kept. The fresh state is checkpointed at once, so a later death
// or wake restores it, not what the restart threw away (that stays in the older checkpoints).
func (ls *Session) RestartFresh(ctx context.Context) error {
	if ls.lock.Busy() {
		_ = ls.Interrupt(ctx)
	}
	end, err := ls.beginTurn(ctx, nil)
	if err != nil {
		return err
	}
	defer end()
	ls.releaseKernel(ctx, "jupyter restart")
	last := ls.docCopy().LastCheckpoint
	if _, err := ls.update(ctx, func(d *carryover.Session) error {
		d.ExecutionCount, d.LastCheckpoint = 0, nil // no restore into the new kernel
		return nil
	}); err != nil {
		return err
	}
	k, err := ls.ensureKernel(ctx)
	if err != nil {
		_, _ = ls.update(ctx, func(d *carryover.Session) error { d.LastCheckpoint = last; return nil })
		return err
	}
	if _, err := ls.checkpoint(ctx, k); err != nil {
		return fmt.Errorf("checkpoint of the restarted kernel: %w", err)
	}
	ls.emit(ctx, carryover.EventKernelRestarted, map[string]any{"fresh": true})
	return nil
}

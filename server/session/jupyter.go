package session

// jupyter.go is the session side of the Jupyter front door (server/jupyter): a Jupyter client's
// execute_request runs as one of the session's turns (the run lock in arrival order, admission and
// budget, the checkpoint riding on the request, the record), while the request and the kernel's
// answers stay raw Jupyter messages, so the client sees exactly what the kernel said. Everything
// else a Jupyter client sends (complete, inspect, comms, input_reply...) goes to Kernel's kernel
// directly.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// RawTurn is how a Jupyter execute_request ended.
type RawTurn struct {
	Reply          *kernel.RawMessage // the kernel's execute_reply (without our snapshot expression); nil when the kernel died first
	Idle           *kernel.RawMessage // the kernel's iopub idle for the request; nil when it died first
	ExecutionCount int
	Died           bool // the kernel died during the turn; the session was restored from its last checkpoint
	// ReplyLost: the kernel went idle after an interrupt and sent no execute_reply (ipykernel drops it
	// when the interrupt lands in its handler after the cell ran; kernel.LostReplyGrace). Reply is
	// nil, Idle the kernel's.
	ReplyLost     bool
	CheckpointErr string
	// Restore is the report of a restore since the last answer (this turn's kernel died, or an
	// earlier one's): the front door tells its client what it names (files ahead of the
	// checkpoint, variables not brought back), which a Jupyter reply has no field for.
	Restore *carryover.RestoreReport
}

// RawTurnOptions connect the turn to the front door.
type RawTurnOptions struct {
	// OnKernel gets the kernel the request goes to before it is sent, so the front door can
	// subscribe to its channels first (a new kernel after a death, hibernation or rotation).
	OnKernel func(*kernel.Kernel)
	// Record, when set, gets the turn's end before it is recorded and returns what to merge into the
	// session's data in the same write as the turn (nil: nothing). The front door keeps there which
	// requests were answered: a record written after the reply could be lost to a kill -9 between
	// the two, and the next process would take an answered request for a lost one.
	Record func(*RawTurn) map[string]any
}

// executeContent is what a turn reads of an execute_request's content.
type executeContent struct {
	Code         string `json:"code"`
	Silent       bool   `json:"silent"`
	StoreHistory *bool  `json:"store_history"`
}

// RunRaw runs a Jupyter execute_request (shell) as a turn of session id. It returns when the turn is
// over, checkpoint committed and record written: the caller sends the reply and the idle status
// then, so "idle" in any Jupyter client means the turn survives a kill -9.
func (s *Service) RunRaw(ctx context.Context, id string, req kernel.RawMessage, opts RawTurnOptions) (*RawTurn, error) {
	ls, err := s.get(id)
	if err != nil {
		return nil, err
	}
	c, msgID, err := parseExecute(&req)
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
		if req.Content, err = withUserExpression(req.Content, snapshotKey, p.Expr); err != nil {
			return nil, carryover.Errorf(carryover.CodeInvalid, "execute_request content: %v", err)
		}
	}
	res := &RunResult{SessionID: ls.id, Status: "error", Outputs: []kernel.Output{}, ride: ride}
	// The client gets the outputs raw from the bridge; the turn's record keeps them too, as a run's
	// does, so the history and the notebook export show what the cell printed.
	col := &collector{max: s.cfg.MaxOutputBytes, res: res}
	shown := ls.showRawTurn(msgID, c)
	turn, durationMS := sendAndWait(ctx, s.log, k, msgID, req, func(o kernel.Output) {
		if col.add(o) && shown != nil {
			shown.output(&ls.hub, o)
		}
	})
	col.finish()
	res.DurationMS = durationMS
	advance := !c.Silent && (c.StoreHistory == nil || *c.StoreHistory)
	runErr := rawOutcome(turn, res, ls.docCopy().ExecutionCount, advance)
	ls.checkpointTurn(ctx, k, res, runErr)
	turn.CheckpointErr = res.CheckpointError
	res.Restore = ls.takeRestored() // in the turn's record; not told again to a later /run
	turn.Restore = res.Restore
	var data map[string]any
	if opts.Record != nil {
		data = opts.Record(turn)
	}
	status := res.Status
	if runErr != nil {
		status = string(carryover.CodeKernelDied)
	}
	s.m.runs.WithLabelValues(status).Inc()
	if err := ls.endTurn(ctx, turnRecord{kind: "run", code: c.Code, count: res.ExecutionCount, advance: advance,
		status: status, answer: res, durationMS: res.DurationMS, updateData: data}); err != nil {
		s.log.Warn("jupyter turn not fully recorded", "session", ls.id, "err", err)
	}
	ls.endRawTurn(shown, res)
	return turn, nil
}

// parseExecute reads a Jupyter execute_request: its content (normalized, stop_on_error off) and its
// msg_id.
func parseExecute(req *kernel.RawMessage) (c executeContent, msgID string, err error) {
	if req.Content, err = normalizeExecute(req.Content); err != nil {
		return c, "", err
	}
	// The kernel never aborts on its own: after a cell that ended in an error, ipykernel's
	// stop_on_error aborts every execute_request that reaches it for a moment, carryover's own
	// snapshot of this very turn included (a raised cell skips user expressions, so that snapshot
	// is a request of its own). The front door aborts the client's queued cells itself instead
	// (server/jupyter turns.go), which are the only ones the kernel would have aborted: it gets the
	// client's executes one at a time.
	if req.Content, err = withField(req.Content, "stop_on_error", false); err != nil {
		return c, "", carryover.Errorf(carryover.CodeInvalid, "execute_request content: %v", err)
	}
	_ = json.Unmarshal(req.Content, &c)
	var hdr struct {
		MsgID string `json:"msg_id"`
	}
	if err := json.Unmarshal(req.Header, &hdr); err != nil || hdr.MsgID == "" {
		return c, "", carryover.Errorf(carryover.CodeInvalid, "execute_request header has no msg_id")
	}
	return c, hdr.MsgID, nil
}

// rawOutcome fills res from how a Jupyter turn ended (count: the session's execution count before
// it); its error is the turn's when the kernel died.
func rawOutcome(turn *RawTurn, res *RunResult, count int, advance bool) error {
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
		res.Status, res.ExecutionCount = replyStatus(turn.Reply)
		res.ride.answer = stripUserExpression(turn.Reply, snapshotKey)
	}
	turn.ExecutionCount = res.ExecutionCount
	return runErr
}

// showRawTurn makes a Jupyter client's visible (not silent) turn a run the session's own clients see
// too, as they see each other's: a busy status with the code, its outputs, its result, then idle,
// under the run id "jupyter-<msg_id>"; a client joining mid-turn gets it in its "running" frame. So
// the UI shows a JupyterLab user's cells as they run. Nil for a silent request (JupyterLab's own
// inspections), which stays between the Jupyter client and the kernel.
func (ls *liveSession) showRawTurn(msgID string, c executeContent) *activeRun {
	if c.Silent {
		return nil
	}
	act := &activeRun{id: "jupyter-" + msgID, code: c.Code}
	ls.mu.Lock()
	ls.running = act
	ls.mu.Unlock()
	ls.hub.broadcast(StatusFrame{Type: "status", ID: act.id, ExecutionState: "busy", Code: c.Code})
	return act
}

// endRawTurn ends what showRawTurn began: the result, then idle (the turn, checkpoint included, is over).
func (ls *liveSession) endRawTurn(act *activeRun, res *RunResult) {
	if act == nil {
		return
	}
	ls.mu.Lock()
	if ls.running == act {
		ls.running = nil
	}
	ls.mu.Unlock()
	ls.hub.broadcast(ResultFrame{Type: "result", ID: act.id, Result: res})
	ls.hub.broadcast(StatusFrame{Type: "status", ID: act.id, ExecutionState: "idle"})
}

// sendAndWait sends the request and waits for its execute_reply and iopub idle, or the kernel's death,
// handing each of its outputs to onOutput.
func sendAndWait(ctx context.Context, log *slog.Logger, k *kernel.Kernel, msgID string, req kernel.RawMessage, onOutput func(kernel.Output)) (*RawTurn, float64) {
	turn := &RawTurn{}
	shell, cancelShell, err1 := k.Subscribe("shell")
	iopub, cancelIOPub, err2 := k.Subscribe("iopub")
	if err := errors.Join(err1, err2); err != nil {
		turn.Died = true
		return turn, 0
	}
	defer cancelShell()
	defer cancelIOPub()
	start := time.Now()
	interrupts := k.Interrupts()
	if err := k.SendRaw(ctx, "shell", req); err != nil {
		log.Warn("jupyter execute_request not sent", "kernel", k.ID(), "err", err)
		turn.Died = true
		return turn, 0
	}
	var lost <-chan time.Time // armed once the idle came without a reply after an interrupt
	for turn.Reply == nil || turn.Idle == nil {
		if lost == nil && turn.Idle != nil && turn.Reply == nil && k.Interrupts() != interrupts {
			lost = time.After(kernel.LostReplyGrace)
		}
		select {
		case <-lost:
			turn.ReplyLost = true
			log.Warn("jupyter execute_reply lost to an interrupt; answered as interrupted", "kernel", k.ID())
			return turn, ms(time.Now().Sub(start))
		case m := <-shell:
			if m.ParentID() == msgID && m.Type() == "execute_reply" {
				turn.Reply = &m
			}
		case m := <-iopub:
			if m.ParentID() != msgID {
				continue
			}
			if out, ok := m.Output(); ok {
				onOutput(out)
			} else if m.Type() == "status" && m.ExecutionState() == "idle" {
				turn.Idle = &m
			}
		case <-k.Dead():
			turn.Reply, turn.Idle, turn.Died = nil, nil, true
			return turn, ms(time.Now().Sub(start))
		}
	}
	return turn, ms(time.Now().Sub(start))
}

// Kernel returns session id's kernel for messages that are not turns (complete, inspect, comms,
// input replies), starting one (and restoring the last checkpoint) when it has none.
func (s *Service) Kernel(ctx context.Context, id string) (*kernel.Kernel, error) {
	ls, err := s.get(id)
	if err != nil {
		return nil, err
	}
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

// LiveKernel returns session id's kernel when it has a live one, nil otherwise (none yet, dead, or
// being restored by the turn holding the session's line). It neither waits nor starts one: the
// Jupyter door's control and stdin channels must reach the kernel of the cell in flight.
func (s *Service) LiveKernel(id string) *kernel.Kernel {
	ls, err := s.get(id)
	if err != nil {
		return nil
	}
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
// complete, inspect, comm messages...) to session id's kernel in its place in the session's line
// of turns, as the kernel itself takes shell requests one at a time: after the turns before it
// (their checkpoints included), never to a kernel that a rotation, hibernation or restart is
// replacing at that moment, and restoring the last checkpoint first when the session has no live
// kernel (admitted as a turn is, then: a paused or closed session is not woken). onKernel gets the
// kernel before the request goes, so the door listens for the reply.
func (s *Service) SendInLine(ctx context.Context, id string, msg kernel.RawMessage, onKernel func(*kernel.Kernel)) error {
	ls, err := s.get(id)
	if err != nil {
		return err
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return err
	}
	defer ls.lock.Unlock()
	k := s.LiveKernel(id)
	if k == nil {
		if err := ls.admit(ctx); err != nil {
			return err
		}
		if k, err = ls.ensureKernel(ctx); err != nil {
			return err
		}
	}
	if onKernel != nil {
		onKernel(k)
	}
	return k.SendRaw(ctx, msg.Channel, msg)
}

// RestartFresh is Jupyter's restart: a new kernel with an empty namespace and the execution count
// back at 1, the workspace files kept. The fresh state is checkpointed at once, so a later death
// or wake restores it, not what the restart threw away (that stays in the older checkpoints).
func (s *Service) RestartFresh(ctx context.Context, id string) error {
	ls, err := s.get(id)
	if err != nil {
		return err
	}
	if k := ls.currentKernel(); k != nil && ls.lock.Busy() {
		_ = k.Interrupt(ctx)
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

// normalizeExecute fills what ipykernel requires of an execute_request and clients may leave out
// (without "silent" it drops the request without a reply, which would hold the session's turn
// forever); a content without a string "code" is refused.
func normalizeExecute(content json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(content, &m); err != nil || m == nil {
		return nil, carryover.Errorf(carryover.CodeInvalid, "execute_request content is not a JSON object")
	}
	var code string
	if err := json.Unmarshal(m["code"], &code); err != nil {
		return nil, carryover.Errorf(carryover.CodeInvalid, "execute_request content.code must be a string")
	}
	defaults := map[string]string{"silent": "false", "user_expressions": "{}", "allow_stdin": "false", "stop_on_error": "true"}
	for k, v := range defaults {
		if raw, ok := m[k]; !ok || string(raw) == "null" {
			m[k] = json.RawMessage(v)
		}
	}
	return json.Marshal(m)
}

// withField sets content's key to v.
func withField(content json.RawMessage, key string, v any) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(content, &m); err != nil {
		return nil, err
	}
	m[key], _ = json.Marshal(v)
	return json.Marshal(m)
}

// withUserExpression adds name: expr to the content's user_expressions.
func withUserExpression(content json.RawMessage, name, expr string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(content, &m); err != nil {
		return nil, err
	}
	ue := map[string]json.RawMessage{}
	if raw, ok := m["user_expressions"]; ok && len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &ue); err != nil {
			return nil, fmt.Errorf("user_expressions: %w", err)
		}
	}
	e, _ := json.Marshal(expr)
	ue[name] = e
	m["user_expressions"], _ = json.Marshal(ue)
	return json.Marshal(m)
}

// stripUserExpression removes name from the reply's user_expressions and returns its text ("" when
// it did not run or failed).
func stripUserExpression(reply *kernel.RawMessage, name string) string {
	var m map[string]json.RawMessage
	if reply == nil || json.Unmarshal(reply.Content, &m) != nil {
		return ""
	}
	var ue map[string]json.RawMessage
	if json.Unmarshal(m["user_expressions"], &ue) != nil || ue == nil {
		return ""
	}
	raw, ok := ue[name]
	if !ok {
		return ""
	}
	delete(ue, name)
	m["user_expressions"], _ = json.Marshal(ue)
	reply.Content, _ = json.Marshal(m)
	text, err := kernel.UserExpressionText(raw)
	if err != nil {
		return ""
	}
	return text
}

// replyStatus reads an execute_reply's status and execution_count.
func replyStatus(reply *kernel.RawMessage) (string, int) {
	var c struct {
		Status         string `json:"status"`
		ExecutionCount int    `json:"execution_count"`
	}
	_ = json.Unmarshal(reply.Content, &c)
	return c.Status, c.ExecutionCount
}

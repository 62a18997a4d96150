package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Output is one iopub output item. Its JSON is the API's output item (docs/api.md), so the server
// can forward it untouched: {"type":"stream","name":"stdout","text":"1\n"},
// {"type":"display_data","data":{...},"metadata":{...}}, {"type":"execute_result",...,"execution_count":3},
// {"type":"error","ename":...,"evalue":...,"traceback":[...]},
// {"type":"update_display_data",...,"transient":{"display_id":..}}, {"type":"clear_output","wait":false}.
type Output struct {
	Type           string                     `json:"type"`
	Name           string                     `json:"name,omitempty"`
	Text           string                     `json:"text,omitempty"`
	Data           map[string]json.RawMessage `json:"data,omitempty"`
	Metadata       map[string]json.RawMessage `json:"metadata,omitempty"`
	Transient      map[string]json.RawMessage `json:"transient,omitempty"`
	ExecutionCount int                        `json:"execution_count,omitempty"`
	EName          string                     `json:"ename,omitempty"`
	EValue         string                     `json:"evalue,omitempty"`
	Traceback      []string                   `json:"traceback,omitempty"`
	Wait           bool                       `json:"wait,omitempty"`
}

// MarshalJSON keeps the fields each output type requires even when empty: an error's ename and
// evalue (a KeyboardInterrupt has evalue ""), a stream's name and text, the data of display_data,
// update_display_data and execute_result. omitempty alone dropped them (found by the API fuzz).
func (o Output) MarshalJSON() ([]byte, error) {
	type plain Output
	switch o.Type {
	case "error":
		return json.Marshal(struct {
			plain
			EName  string `json:"ename"`
			EValue string `json:"evalue"`
		}{plain(o), o.EName, o.EValue})
	case "stream":
		return json.Marshal(struct {
			plain
			Name string `json:"name"`
			Text string `json:"text"`
		}{plain(o), o.Name, o.Text})
	case "display_data", "update_display_data", "execute_result":
		data := o.Data
		if data == nil {
			data = map[string]json.RawMessage{}
		}
		return json.Marshal(struct {
			plain
			Data map[string]json.RawMessage `json:"data"`
		}{plain(o), data})
	}
	return json.Marshal(plain(o))
}

// InputRequest is the kernel asking for a line of input (input(), getpass()).
type InputRequest struct {
	Prompt   string
	Password bool
}

// ExecOptions tune one Execute.
type ExecOptions struct {
	Silent bool
	// StoreHistory is sent as store_history for silent executes (where the kernel ignores it anyway).
	// Non-silent executes always store history, so execution counts and Out[] behave as in Jupyter.
	StoreHistory    bool
	StopOnError     bool
	UserExpressions map[string]string
	// OnOutput is called in kernel order, from one goroutine (the one that called Execute), for every
	// output of this execution; none is ever dropped. It must not block long: outputs queue meanwhile.
	OnOutput func(Output)
	// OnStatus gets "busy" / "idle" for this execution, ordered with the outputs.
	OnStatus func(state string)
	// OnStart is called when the kernel says it started this (non-silent) execution: its
	// execute_input. ipykernel sends it from within its handler, where an interrupt takes effect;
	// before, between cells, it ignores SIGINT (its "busy" comes before that).
	OnStart func()
	// OnComm gets the content of each comm_msg the kernel sends while this execution runs (parented
	// to it), ordered with the outputs: an ipywidgets Output widget says there which outputs it
	// captures (server/session/comms.go).
	OnComm func(content json.RawMessage)
	// OnInput answers input_request; nil means allow_stdin=false (input() raises in the kernel). It
	// runs on its own goroutine so outputs keep flowing while it waits; ctx ends when Execute returns.
	// An error answers EOF (the kernel's input() raises EOFError), and so does a callback that gives up
	// because ctx ended.
	OnInput func(ctx context.Context, req InputRequest) (string, error)
	// Metadata is the execute_request's metadata (nil: {}). Kernels ignore keys they do not know; the
	// snapshot agent reads carryover_setup from it (see the agent's pre_run_cell).
	Metadata map[string]any
}

// ExecResult is the execute_reply, plus timing.
type ExecResult struct {
	Status          string // "ok" | "error" | "aborted"
	ExecutionCount  int
	EName, EValue   string
	Traceback       []string
	UserExpressions map[string]json.RawMessage // each: {"status":"ok","data":{"text/plain":...}} as sent
	Payload         []json.RawMessage
	// Started is when the request was sent, Finished when both the reply and the idle status arrived.
	Started, Finished time.Time
	// Input is the kernel's input count with this request (Kernel.Inputs): while Inputs still says
	// so, nothing reached the kernel after it.
	Input uint64
}

type executeRequest struct {
	Code            string            `json:"code"`
	Silent          bool              `json:"silent"`
	StoreHistory    bool              `json:"store_history"`
	UserExpressions map[string]string `json:"user_expressions"`
	AllowStdin      bool              `json:"allow_stdin"`
	StopOnError     bool              `json:"stop_on_error"`
}

type executeReply struct {
	Status          string                     `json:"status"`
	ExecutionCount  int                        `json:"execution_count"`
	EName           string                     `json:"ename"`
	EValue          string                     `json:"evalue"`
	Traceback       []string                   `json:"traceback"`
	UserExpressions map[string]json.RawMessage `json:"user_expressions"`
	Payload         []json.RawMessage          `json:"payload"`
}

var emptyExpressions = map[string]string{}

// Execute runs code; it returns only when BOTH the execute_reply and the iopub idle with the same
// parent arrived. ctx cancellation returns ctx.Err() (wrapped; it does NOT interrupt the kernel: the
// caller decides). If the kernel dies meanwhile it returns promptly with an error satisfying
// errors.Is(err, ErrDied), after delivering the outputs that did arrive. Executes are serialised per
// kernel (a second Execute waits for the first).
func (k *Kernel) Execute(ctx context.Context, code string, opts ExecOptions) (*ExecResult, error) {
	select {
	case k.execSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("kernel %s: execute: waiting for the previous execute: %w", k.id, ctx.Err())
	}
	defer func() { <-k.execSem }()

	inst, err := k.live(ctx)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: execute: %w", k.id, err)
	}
	ue := opts.UserExpressions
	if ue == nil {
		ue = emptyExpressions
	}
	req := executeRequest{
		Code:            code,
		Silent:          opts.Silent,
		StoreHistory:    opts.StoreHistory || !opts.Silent,
		UserExpressions: ue,
		AllowStdin:      opts.OnInput != nil,
		StopOnError:     opts.StopOnError,
	}
	w := newWaiter(true)
	res := &ExecResult{Started: time.Now()}
	h, seq, err := inst.sendSeq(chShell, "execute_request", nil, opts.Metadata, req, w)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: execute: %w", k.id, err)
	}
	res.Input = seq
	defer inst.unregister(h.MsgID)

	inputCtx, cancelInput := context.WithCancel(ctx)
	defer cancelInput()
	run := &execRun{k: k, inst: inst, w: w, opts: &opts, res: res, inputCtx: inputCtx}
	interrupts := k.interrupts.Load()
	var lost <-chan time.Time // armed once the idle came without a reply after an interrupt
	for !run.done() {
		if lost == nil && run.gotIdle && !run.gotReply && k.interrupts.Load() != interrupts {
			lost = time.After(LostReplyGrace)
		}
		select {
		case <-w.notify:
			if err := run.deliver(); err != nil {
				return nil, err
			}
		case <-lost:
			run.replyLost()
		case <-inst.dead:
			inst.settle()
			if err := run.deliver(); err != nil { // what was sent before the death is still output
				return nil, err
			}
			if run.done() {
				break
			}
			return nil, fmt.Errorf("kernel %s: execute: %w", k.id, inst.err)
		case <-ctx.Done():
			return nil, fmt.Errorf("kernel %s: execute: %w", k.id, ctx.Err())
		}
	}
	res.Finished = time.Now()
	return res, nil
}

// execRun is one execute_request in flight: done once both its execute_reply and the iopub idle
// with it as parent arrived.
type execRun struct {
	k        *Kernel
	inst     *instance
	w        *waiter
	opts     *ExecOptions
	res      *ExecResult
	inputCtx context.Context // ends with the execution: releases an unanswered input() prompt

	gotReply, gotIdle bool
	buf               []event
}

func (r *execRun) done() bool { return r.gotReply && r.gotIdle }

// LostReplyGrace is how long an execute waits for its reply once the kernel went idle after an
// interrupt. ipykernel sends no execute_reply when the interrupt lands in its message handler after
// the cell ran (a post_run_cell hook, the reply's own sending): it logs "KeyboardInterrupt caught in
// kernel" and goes idle. Waiting on for the reply held the run until its deadline and its kernel's
// restart. The reply is sent before the idle, on another socket: a reply this late is not coming.
const LostReplyGrace = 2 * time.Second

// LostReplyMessage says why a cell whose reply was lost is answered as interrupted.
const LostReplyMessage = "the kernel was interrupted as the cell finished and sent no reply; the cell's outputs are all it produced"

// replyLost ends an execute whose reply the kernel dropped (LostReplyGrace) as an interrupted cell.
func (r *execRun) replyLost() {
	res := r.res
	res.Status, res.EName = "error", "KeyboardInterrupt"
	res.EValue = LostReplyMessage
	res.Traceback = []string{"KeyboardInterrupt: " + res.EValue}
	r.gotReply = true
	r.k.log.Warn("execute_reply lost to an interrupt; the cell is answered as interrupted")
}

// deliver handles every queued event in arrival order (iopub order is kernel order).
func (r *execRun) deliver() error {
	r.buf = r.w.take(r.buf)
	for _, e := range r.buf {
		m := e.msg
		switch e.ch {
		case chShell:
			if m.Header.MsgType != "execute_reply" {
				continue
			}
			if err := r.reply(m); err != nil {
				return err
			}
		case chStdin:
			if m.Header.MsgType == "input_request" {
				r.k.answerInput(r.inputCtx, r.inst, m, r.opts.OnInput)
			}
		case chIOPub:
			r.gotIdle = r.k.deliverIOPub(m, r.opts) || r.gotIdle
		}
	}
	return nil
}

// reply records the execute_reply.
func (r *execRun) reply(m *message) error {
	var rep executeReply
	if err := json.Unmarshal(m.Content, &rep); err != nil {
		return fmt.Errorf("kernel %s: execute_reply: %w", r.k.id, err)
	}
	res := r.res
	res.Status, res.ExecutionCount = rep.Status, rep.ExecutionCount
	res.EName, res.EValue, res.Traceback = rep.EName, rep.EValue, rep.Traceback
	res.UserExpressions, res.Payload = rep.UserExpressions, rep.Payload
	r.gotReply = true
	return nil
}

// deliverIOPub turns one iopub message of this execution into a callback and reports whether it was
// the idle status that ends it.
func (k *Kernel) deliverIOPub(m *message, opts *ExecOptions) (idle bool) {
	switch t := m.Header.MsgType; {
	case t == "status":
		var st struct {
			ExecutionState string `json:"execution_state"`
		}
		if err := json.Unmarshal(m.Content, &st); err != nil {
			k.log.Warn("bad status message", "err", err)
			return false
		}
		if opts.OnStatus != nil && (st.ExecutionState == "busy" || st.ExecutionState == "idle") {
			opts.OnStatus(st.ExecutionState)
		}
		return st.ExecutionState == "idle"
	case t == "execute_input":
		if opts.OnStart != nil {
			opts.OnStart()
		}
	case t == "comm_msg":
		if opts.OnComm != nil {
			opts.OnComm(m.Content)
		}
	case isOutput(t):
		if opts.OnOutput == nil {
			return false
		}
		out, err := decodeOutput(t, m.Content)
		if err != nil {
			k.log.Warn("bad output message", "type", t, "err", err)
		}
		opts.OnOutput(out)
	}
	return false
}

// isOutput says whether an iopub message of type t is a cell output.
func isOutput(t string) bool {
	switch t {
	case "stream", "display_data", "update_display_data", "execute_result", "error", "clear_output":
		return true
	}
	return false
}

// decodeOutput turns the content of an output message of type t into an Output. Content that does
// not decode becomes an error output that says so, with the error: never dropped silently.
func decodeOutput(t string, content []byte) (Output, error) {
	out := Output{Type: t}
	if err := json.Unmarshal(content, &out); err != nil {
		return Output{Type: "error", EName: "CarryoverProtocolError", EValue: fmt.Sprintf("undecodable %s message: %v", t, err)}, err
	}
	out.Type = t
	return out, nil
}

// answerInput calls OnInput on its own goroutine and sends the input_reply.
func (k *Kernel) answerInput(ctx context.Context, inst *instance, m *message, onInput func(context.Context, InputRequest) (string, error)) {
	var req struct {
		Prompt   string `json:"prompt"`
		Password bool   `json:"password"`
	}
	_ = json.Unmarshal(m.Content, &req) // a malformed request still gets an answer
	parent := m.Header
	go func() {
		value := "\x04" // EOF: what ipykernel turns into EOFError
		if onInput != nil {
			v, err := onInput(ctx, InputRequest{Prompt: req.Prompt, Password: req.Password})
			if err != nil {
				k.log.Debug("input request not answered", "err", err)
			} else {
				value = v
			}
		}
		// Answer even when the execute is over (ctx cancelled): a kernel left inside input() would
		// block every later request.
		if _, err := inst.send(chStdin, "input_reply", &parent, map[string]string{"value": value}, nil); err != nil && !inst.isDead() {
			k.log.Warn("send input_reply", "err", err)
		}
	}()
}

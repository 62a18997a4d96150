// Package rawexec is the Jupyter wire side of a Jupyter client's execute_request run as a session's
// turn (session.Session.RunRaw): the request read and normalized, carryover's snapshot riding on it
// as a user expression and taken off the reply again, and the request sent to the kernel with its
// execute_reply, iopub idle and outputs awaited. The request and the kernel's answers stay raw
// Jupyter messages, so the client sees exactly what the kernel said.
package rawexec

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

// Turn is how a Jupyter execute_request ended.
type Turn struct {
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
	// RecordErr says what of the turn's record (the session's data with the front door's answer,
	// the history) failed to be written, "" when all of it was: the answer then holds in no store,
	// and the session may continue from before the cell (a node that lost the session to another).
	RecordErr string
}

// Content is what a turn reads of an execute_request's content.
type Content struct {
	Code         string `json:"code"`
	Silent       bool   `json:"silent"`
	StoreHistory *bool  `json:"store_history"`
}

// Parse reads a Jupyter execute_request: its content (normalized, stop_on_error off) and its
// msg_id.
func Parse(req *kernel.RawMessage) (c Content, msgID string, err error) {
	if req.Content, err = normalize(req.Content); err != nil {
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

// SendAndWait sends the request and waits for its execute_reply and iopub idle, or the kernel's death,
// handing each of its outputs to onOutput.
func SendAndWait(ctx context.Context, log *slog.Logger, k *kernel.Kernel, msgID string, req kernel.RawMessage, onOutput func(kernel.Output)) (*Turn, float64) {
	turn := &Turn{}
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
			return turn, ms(time.Since(start))
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
			return turn, ms(time.Since(start))
		}
	}
	return turn, ms(time.Since(start))
}

// normalize fills what ipykernel requires of an execute_request and clients may leave out
// (without "silent" it drops the request without a reply, which would hold the session's turn
// forever); a content without a string "code" is refused.
func normalize(content json.RawMessage) (json.RawMessage, error) {
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

// WithUserExpression adds name: expr to the content's user_expressions.
func WithUserExpression(content json.RawMessage, name, expr string) (json.RawMessage, error) {
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

// StripUserExpression removes name from the reply's user_expressions and returns its text ("" when
// it did not run or failed).
func StripUserExpression(reply *kernel.RawMessage, name string) string {
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

// ReplyStatus reads an execute_reply's status and execution_count.
func ReplyStatus(reply *kernel.RawMessage) (string, int) {
	var c struct {
		Status         string `json:"status"`
		ExecutionCount int    `json:"execution_count"`
	}
	_ = json.Unmarshal(reply.Content, &c)
	return c.Status, c.ExecutionCount
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

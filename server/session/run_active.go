package session

// run_active.go: the run in flight as the session's clients see it (outputs so far for one that
// joins mid-run, the pending input() prompt any of them may answer).

import (
	"context"
	"sync"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/stream"
)

// activeRun is the run in flight; websocket clients that connect mid-run get its outputs so far,
// and its pending input() prompt, which any of the session's clients may answer.
type activeRun struct {
	mu      sync.Mutex
	id      string
	code    string
	outputs []kernel.Output
	prompt  *stream.InputRequestFrame // the pending prompt, nil when none
	reply   chan string               // where an input_reply goes
}

// frameLocked is the "running" frame; the caller holds a.mu.
func (a *activeRun) frameLocked() stream.RunningFrame {
	return stream.RunningFrame{Type: "running", ID: a.id, Code: a.code, InputRequest: a.prompt,
		Outputs: append([]kernel.Output(nil), a.outputs...)}
}

// output keeps o for clients joining mid-run and streams it to the session's subscribers.
func (a *activeRun) output(h *stream.Hub, o kernel.Output) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outputs = append(a.outputs, o)
	h.Broadcast(stream.OutputFrame{Type: "output", ID: a.id, Output: o})
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
func (a *activeRun) askInput(ctx context.Context, h *stream.Hub, req kernel.InputRequest) (string, error) {
	frame := &stream.InputRequestFrame{Type: "input_request", ID: a.id, Prompt: req.Prompt, Password: req.Password}
	a.mu.Lock()
	a.prompt, a.reply = frame, make(chan string, 1)
	reply := a.reply
	h.Broadcast(frame)
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

// ResultFrame is a run's answer, as POST /run would give it.
type ResultFrame struct {
	Type   string     `json:"type"` // "result"
	ID     string     `json:"id"`
	Result *RunResult `json:"result"`
}

package jupyter

// answered.go: exactly once per msg_id. A client that did not see its reply (a websocket that
// dropped, a carryover that was killed and started again) may send the same execute_request
// again; the door never runs it twice. The executes answered lately are kept, with how each
// ended, in the session's data (answeredKey), written in the same transaction as the turn itself
// (RawTurnOptions.Record), so that no kill -9 can fall between the answer and its record: a
// request sent again is answered from there, and the in-flight record a killed process left is
// not taken for lost requests when they were answered. The session of the kernel's messages is
// kept there too (kernelSessionKey): what carryover writes itself carries it (see stamp).

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/rawexec"
)

const (
	answeredKey      = "jupyter_answered"       // the executes answered lately, oldest first
	kernelSessionKey = "jupyter_kernel_session" // header.session of the kernel's messages
	answeredCap      = 64                       // answers kept: a client sends again what it sent lately (~6 KB written with each turn)
)

// answer is how an execute_request ended, as its execute_reply said.
type answer struct {
	MsgID          string `json:"msg_id"`
	Status         string `json:"status"`
	ExecutionCount *int   `json:"execution_count,omitempty"`
	EName          string `json:"ename,omitempty"`
	EValue         string `json:"evalue,omitempty"`
}

// answerOf reads how a turn ended.
func answerOf(msgID string, t *rawexec.Turn) answer {
	a := answer{MsgID: msgID, Status: "error"}
	switch {
	case t.Died:
		a.EName, a.EValue = "KernelDied", "the kernel died while running this cell"
	case t.ReplyLost:
		a.EName, a.EValue = "KeyboardInterrupt", kernel.LostReplyMessage
	case t.Reply != nil:
		var c struct {
			Status         string `json:"status"`
			ExecutionCount *int   `json:"execution_count"`
			EName          string `json:"ename"`
			EValue         string `json:"evalue"`
		}
		_ = json.Unmarshal(t.Reply.Content, &c)
		a.Status, a.ExecutionCount, a.EName, a.EValue = c.Status, c.ExecutionCount, c.EName, c.EValue
	}
	return a
}

// answeredLocked reports how msgID was answered. The caller holds b.mu.
func (b *bridge) answeredLocked(msgID string) (answer, bool) {
	for i := len(b.answers) - 1; i >= 0; i-- {
		if b.answers[i].MsgID == msgID {
			return b.answers[i], true
		}
	}
	return answer{}, false
}

// noteAnswerLocked adds a to the answers kept and returns the session data that records them. The
// caller holds b.mu.
func (b *bridge) noteAnswerLocked(a answer) map[string]any {
	b.answers = append(b.answers, a)
	if n := len(b.answers) - answeredCap; n > 0 {
		b.answers = append([]answer(nil), b.answers[n:]...)
	}
	data := map[string]any{answeredKey: append([]answer(nil), b.answers...)}
	if b.kernSession != "" {
		data[kernelSessionKey] = b.kernSession
	}
	return data
}

// notRecordedName is the ename a request sent again gets when its turn's record was not written.
const notRecordedName = "CarryoverNotRecorded"

// unrecorded turns the answer kept for msgID into an error that says why: the turn's write failed
// (the node lost the session to another, the store refused it), so no store holds its answer and the
// session may continue from before the cell. A request sent again is answered with that error, never
// with an "ok" only this process remembers (found by the chaos harness: after PostgreSQL restarts
// moved the session, a re-sent request was answered ok from memory while the session came back a
// turn earlier).
func (b *bridge) unrecorded(msgID, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.answers) - 1; i >= 0; i-- {
		if b.answers[i].MsgID == msgID {
			b.answers[i] = answer{MsgID: msgID, Status: "error", EName: notRecordedName,
				EValue: "this cell ran, but carryover could not record it (" + why + "): the session may continue from before it; run it again if its effects are missing"}
			return
		}
	}
}

// recordTurn is the turn's RawTurnOptions.Record: the answer goes into the turn's own write.
func (b *bridge) recordTurn(msgID string) func(*rawexec.Turn) map[string]any {
	return func(t *rawexec.Turn) map[string]any {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.noteAnswerLocked(answerOf(msgID, t))
	}
}

// loadRecord reads what a previous process left in the session's data: the answers and the
// kernel's session.
func (b *bridge) loadRecord(data map[string]any) {
	var rec struct {
		Answers []answer `json:"jupyter_answered"`
		Session string   `json:"jupyter_kernel_session"`
	}
	raw, _ := json.Marshal(map[string]any{answeredKey: data[answeredKey], kernelSessionKey: data[kernelSessionKey]})
	_ = json.Unmarshal(raw, &rec)
	b.mu.Lock()
	if len(b.answers) == 0 {
		b.answers = rec.Answers
	}
	if b.kernSession == "" {
		b.kernSession = rec.Session
	}
	b.mu.Unlock()
}

// saveAnswers records the answers kept (those failLost gave, which no turn wrote).
func (b *bridge) saveAnswers() {
	b.mu.Lock()
	data := map[string]any{answeredKey: append([]answer(nil), b.answers...)}
	b.mu.Unlock()
	if _, err := b.d.svc.Patch(context.Background(), b.id, data); err != nil {
		b.d.log.Warn("jupyter: answered requests not recorded", "kernel", b.id, "err", err)
	}
}

// duplicate tells whether an execute_request with msgID is one the door has already: answered
// (it is answered again from the record, never run again), or queued or running (its reply is on
// its way: deliver sends it to every connection when the one that asked is gone).
func (b *bridge) duplicate(c *conn, m kernel.RawMessage, msgID string) bool {
	b.mu.Lock()
	a, done := b.answeredLocked(msgID)
	inLine := b.current != nil && b.current.msgID == msgID
	for _, q := range b.queue {
		inLine = inLine || q.msgID == msgID
	}
	b.mu.Unlock()
	switch {
	case done:
		b.d.log.Info("jupyter: an execute_request sent again is answered from its record, not run again", "kernel", b.id, "msg_id", msgID)
		b.broadcast(statusMsg(m.Header, "busy"))
		b.deliver(c, answerReply(m, a))
		b.broadcast(statusMsg(m.Header, "idle"))
		return true
	case inLine:
		b.d.log.Info("jupyter: an execute_request sent again while it is in line is not run twice", "kernel", b.id, "msg_id", msgID)
		return true
	}
	return false
}

// answerReply is the execute_reply of an answered request, rebuilt from its record and marked so.
func answerReply(req kernel.RawMessage, a answer) kernel.RawMessage {
	content := map[string]any{"status": a.Status, "execution_count": a.ExecutionCount}
	if a.Status == "ok" {
		content["user_expressions"], content["payload"] = map[string]any{}, []any{}
	} else {
		content["ename"], content["evalue"] = a.EName, a.EValue
		content["traceback"] = []string{fmt.Sprintf("%s: %s", a.EName, a.EValue)}
	}
	m := replyMsg(req.Header, "execute_reply", content)
	m.Metadata, _ = json.Marshal(map[string]any{"carryover": map[string]any{
		"duplicate": "this request was answered before; it is not run again"}})
	return m
}

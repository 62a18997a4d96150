package jupyter

// turns.go: a kernel's shell messages, one at a time in arrival order: each execute_request runs as
// a turn of its session (session.Session.RunRaw), any other message goes to the kernel in its place
// in the session's line (session.Session.SendInLine). The turn's execute_reply and iopub idle are
// held back until its checkpoint committed; a kernel death answers the request with an error reply
// and an idle (nbclient would wait forever otherwise); an error aborts the queued executes like
// ipykernel's stop_on_error (the kernel itself is asked not to: see RunRaw).

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session"
	"github.com/carryover/carryover/server/session/rawexec"
)

// turnJob is one queued shell message.
type turnJob struct {
	c       *conn
	msg     kernel.RawMessage
	msgID   string
	msgType string
}

// execute tells a turn (an execute_request) from a message sent to the kernel in its place.
func (j turnJob) execute() bool { return j.msgType == "execute_request" }

func (b *bridge) enqueue(j turnJob) {
	b.mu.Lock()
	b.queue = append(b.queue, j)
	busy := b.current != nil
	b.mu.Unlock()
	if busy && j.execute() { // queued behind a running cell: lost too if carryover dies now, so on record at once
		b.saveInflight()
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *bridge) turnWorker() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.mu.Unlock()
			select {
			case <-b.wake:
				continue
			case <-b.stop:
				return
			}
		}
		j := b.queue[0]
		b.queue = b.queue[1:]
		b.running++
		if !j.execute() {
			b.mu.Unlock()
			b.sendInLine(j)
			b.mu.Lock()
			b.running--
			b.mu.Unlock()
			continue
		}
		b.current = &j
		b.held[j.msgID] = make(chan struct{})
		b.heldReply[j.msgID] = make(chan struct{})
		b.mu.Unlock()
		b.saveInflight()
		b.runTurn(j)
		b.mu.Lock()
		b.running--
		b.current = nil
		delete(b.held, j.msgID)
		delete(b.heldReply, j.msgID)
		delete(b.pending, j.msgID)
		b.mu.Unlock()
		// Off the next turn's path: a client that sends its next cell on this one's idle would wait
		// for this write (the next turn's own record, written before it runs, replaces it anyway).
		b.saveInflightLater()
	}
}

// sendInLine sends a shell message that is not an execute_request to the kernel, after the turns
// before it; one that cannot go is answered with an error reply.
func (b *bridge) sendInLine(j turnJob) {
	err := b.d.onSession(b.id, func(ls *session.Session) error {
		return ls.SendInLine(context.Background(), j.msg, func(k *kernel.Kernel) {
			b.attach(k, j.msg.Header)
			b.sentTo(j.msg, k)
			b.comms.Observe(j.msg) // when it reaches a kernel: a comm_open waiting for a restore opens in the new one
		})
	})
	if err != nil {
		b.failDelivery(j.c, j.msg, j.msgType, err)
	}
}

// runTurn runs one execute_request and answers it.
func (b *bridge) runTurn(j turnJob) {
	var res *rawexec.Turn
	err := b.d.onSession(b.id, func(ls *session.Session) (err error) {
		res, err = ls.RunRaw(context.Background(), j.msg, session.RawTurnOptions{OnKernel: func(k *kernel.Kernel) {
			b.attach(k, j.msg.Header)
		}, Record: b.recordTurn(j.msgID)})
		return err
	})
	if err == nil && res.RecordErr != "" {
		b.unrecorded(j.msgID, res.RecordErr)
	}
	switch {
	case err != nil:
		e := carryover.ErrorOf(err)
		b.failExecute(j, string(e.Code), e.Message)
	case res.Died:
		b.failExecute(j, "KernelDied", fmt.Sprintf(
			"the kernel died while running this cell; carryover restored the session from its last checkpoint (execution count %d)%s",
			res.ExecutionCount, restoreNotice(res.Restore, "; ")))
	case res.ReplyLost:
		b.awaitKernelIdle(j.msgID) // the cell's outputs first
		b.failExecute(j, "KeyboardInterrupt", kernel.LostReplyMessage)
	default:
		// The executes queued now are the ones the kernel would have aborted: the client sent them
		// before it saw this error. Taken off the line before the reply and idle go out, so a cell
		// the client sends on seeing them runs.
		var aborted []turnJob
		if status, _ := replyFields(res.Reply.Content); status == "error" && stopOnError(j.msg.Content) {
			aborted = b.takeQueuedExecutes()
		}
		if n := restoreNotice(res.Restore, ""); n != "" {
			b.broadcast(iopubMsg(j.msg.Header, "stream", map[string]any{"name": "stderr", "text": "[carryover: " + n + "]\n"}))
		}
		if res.RecordErr != "" {
			b.broadcast(iopubMsg(j.msg.Header, "stream", map[string]any{"name": "stderr",
				"text": "[carryover: this cell's record was not written, the session may continue from before it: " + res.RecordErr + "]\n"}))
		}
		if res.CheckpointErr != "" {
			b.broadcast(iopubMsg(j.msg.Header, "stream", map[string]any{"name": "stderr",
				"text": "[carryover: this cell's checkpoint failed, a crash now would lose it: " + res.CheckpointErr + "]\n"}))
		}
		b.awaitKernelIdle(j.msgID)
		b.awaitKernelReply(j.msgID)
		b.deliver(j.c, *res.Reply)
		b.broadcast(*res.Idle)
		b.answerAborted(aborted)
	}
}

// outputsGrace bounds awaitKernelIdle: the kernel's idle reaches the bridge microseconds after the
// turn's own copy in the normal case; a bridge that missed it must not hold the client up for long.
const outputsGrace = 500 * time.Millisecond

// awaitKernelIdle waits until the kernel's own idle for msgID has gone through fromKernel, so every
// output the cell produced (which the kernel sends before it) has reached the clients. The turn's
// held idle and reply must not overtake them: nbclient ignores outputs that come after the idle (a
// cell's execute_result was lost that way in a loaded CI run), JupyterLab drops them too.
func (b *bridge) awaitKernelIdle(msgID string) { b.awaitHeld(b.held, msgID) }

// awaitKernelReply waits until the kernel's own execute_reply for msgID has gone through
// fromKernel, so every shell reply the kernel sent before it has reached the clients: the turn gets
// its reply straight from the kernel, while the replies to the shell messages sent ahead of it (a
// complete_request, a kernel_info_request) go through the bridge's own subscription, and on a
// loaded machine that goroutine ran behind the turn's checkpoint: a client saw the cell's reply
// before the one to the request it had sent first.
func (b *bridge) awaitKernelReply(msgID string) { b.awaitHeld(b.heldReply, msgID) }

// awaitHeld waits, at most outputsGrace, for msgID's channel in held (b.held or b.heldReply) to be
// closed by fromKernel; a channel already closed and dropped (nil) returns at once.
func (b *bridge) awaitHeld(held map[string]chan struct{}, msgID string) {
	b.mu.Lock()
	ch := held[msgID]
	b.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-time.After(outputsGrace):
	}
}

// inflightKey holds, in the session document, the headers of the execute_requests running or queued,
// so that a carryover killed mid-cell fails them explicitly for the client that reconnects to the
// next process instead of leaving its futures waiting forever.
const inflightKey = "jupyter_inflight"

// saveInflight records the execute in the turn worker and the queued ones (or clears the record when
// there are none). It runs at every change of either, under saveMu, so the record a kill leaves
// behind is the latest; a record equal to the one written last is not written again.
func (b *bridge) saveInflight() {
	b.saveMu.Lock()
	defer b.saveMu.Unlock()
	b.mu.Lock()
	var headers []any
	if b.current != nil {
		headers = append(headers, string(b.current.msg.Header))
	}
	for _, q := range b.queue {
		if q.execute() {
			headers = append(headers, string(q.msg.Header))
		}
	}
	b.mu.Unlock()
	key := fmt.Sprint(headers)
	if b.inflightWritten != nil && *b.inflightWritten == key {
		return
	}
	var value any // nil clears the record
	if len(headers) > 0 {
		value = headers
	}
	if _, err := b.d.svc.Patch(context.Background(), b.id, map[string]any{inflightKey: value}); err != nil {
		b.d.log.Warn("jupyter: in-flight requests not recorded", "kernel", b.id, "err", err)
		return
	}
	b.inflightWritten = &key
}

// saveInflightLater has saveInflight run on the bridge's recorder goroutine; it returns at once.
// Requests pile up into one write.
func (b *bridge) saveInflightLater() {
	select {
	case b.inflightDirty <- struct{}{}:
	default: // a write is due already; it reads the state when it runs
	}
}

// inflightRecorder runs the writes saveInflightLater asks for.
func (b *bridge) inflightRecorder() {
	for {
		select {
		case <-b.inflightDirty:
			b.saveInflight()
		case <-b.stop:
			return
		}
	}
}

// failLost answers, once per process, the execute_requests a previous carryover process was running
// or had queued when it was killed: an error reply and an idle each, to every connection.
func (b *bridge) failLost() {
	b.mu.Lock()
	done := b.lostChecked
	b.lostChecked = true
	b.mu.Unlock()
	if done {
		return
	}
	doc, err := b.d.svc.Get(b.id)
	if err != nil {
		return
	}
	b.loadRecord(doc.Data)
	list, _ := doc.Data[inflightKey].([]any)
	if len(list) == 0 {
		return
	}
	const lost = "carryover was restarted while this cell was running or queued; its result is lost and the session is at its last checkpoint"
	for _, h := range list {
		hs, _ := h.(string)
		req := kernel.RawMessage{Channel: "shell", Header: json.RawMessage(hs)}
		id := msgID(req)
		b.mu.Lock()
		_, done := b.answeredLocked(id)
		if !done && id != "" { // answered before the kill: the record of its turn says so
			b.noteAnswerLocked(answer{MsgID: id, Status: "error", EName: "CarryoverRestarted", EValue: lost})
		}
		b.mu.Unlock()
		if done || !json.Valid(req.Header) {
			continue
		}
		b.broadcast(errorReply(req, "execute_reply", "CarryoverRestarted", lost))
		b.broadcast(statusMsg(req.Header, "idle"))
	}
	b.saveAnswers()  // sent again, a lost request is answered as lost, not run
	b.saveInflight() // what this process runs or queues now, if anything, replaces the old record
}

// deliver sends a reply to the client that asked: its sockets (the one that asked may be a dead
// one the client has just replaced), or, when it has none (it is reconnecting), to every
// connection, kept for it until it is back (parkLocked): clients ignore replies to requests that
// are not theirs.
func (b *bridge) deliver(c *conn, m kernel.RawMessage) {
	b.mu.Lock()
	m = b.stampLocked(m)
	var to []*conn
	for o := range b.conns {
		if o == c || (c.sid != "" && o.sid == c.sid) {
			to = append(to, o)
		}
	}
	b.mu.Unlock()
	if len(to) == 0 {
		b.broadcast(m)
		return
	}
	for _, o := range to {
		o.send(m)
	}
}

// failExecute answers an execute_request that could not run, or whose kernel died, with an error
// output, an error reply and an idle status.
func (b *bridge) failExecute(j turnJob, ename, evalue string) {
	tb := []string{ename + ": " + evalue}
	b.broadcast(iopubMsg(j.msg.Header, "error", map[string]any{"ename": ename, "evalue": evalue, "traceback": tb}))
	b.deliver(j.c, errorReply(j.msg, "execute_reply", ename, evalue))
	b.broadcast(statusMsg(j.msg.Header, "idle"))
}

// abortQueued answers every queued execute_request with status aborted (ipykernel's stop_on_error).
func (b *bridge) abortQueued() {
	b.answerAborted(b.takeQueuedExecutes())
}

// takeQueuedExecutes takes the execute_requests off the line (the other shell messages keep their
// places, as ipykernel aborts executes only).
func (b *bridge) takeQueuedExecutes() []turnJob {
	b.mu.Lock()
	var q, kept []turnJob
	for _, j := range b.queue {
		if j.execute() {
			q = append(q, j)
			delete(b.pending, j.msgID)
		} else {
			kept = append(kept, j)
		}
	}
	b.queue = kept
	b.mu.Unlock()
	if len(q) > 0 {
		b.saveInflight()
	}
	return q
}

// answerAborted answers executes taken off the line as ipykernel answers the ones it aborts: busy,
// an execute_reply with status aborted, idle.
func (b *bridge) answerAborted(q []turnJob) {
	for _, j := range q {
		b.broadcast(statusMsg(j.msg.Header, "busy"))
		reply := replyMsg(j.msg.Header, "execute_reply", map[string]any{"status": "aborted", "execution_count": nil})
		b.deliver(j.c, reply)
		b.broadcast(statusMsg(j.msg.Header, "idle"))
	}
}

// stopRunning aborts the queue and interrupts the cell in flight, for a shutdown.
func (b *bridge) stopRunning(ctx context.Context) {
	b.abortQueued()
	if b.busy() {
		_ = b.d.onSession(b.id, func(ls *session.Session) error { return ls.Interrupt(ctx) })
	}
	for deadline := time.Now().Add(10 * time.Second); b.busy() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

// stopOnError tells whether an error of this execute_request aborts the queued ones: as in
// ipykernel, unless it asked not to (stop_on_error false) or is silent.
func stopOnError(content json.RawMessage) bool {
	var c struct {
		StopOnError *bool `json:"stop_on_error"`
		Silent      bool  `json:"silent"`
	}
	_ = json.Unmarshal(content, &c)
	return !c.Silent && (c.StopOnError == nil || *c.StopOnError)
}

func replyFields(content json.RawMessage) (status string, count int) {
	var c struct {
		Status         string `json:"status"`
		ExecutionCount int    `json:"execution_count"`
	}
	_ = json.Unmarshal(content, &c)
	return c.Status, c.ExecutionCount
}

// ownSession is the session of the messages carryover writes itself, until the bridge gives them
// the kernel's (stampLocked).
const ownSession = "carryover"

// header builds a header for a message carryover synthesizes.
func header(msgType string) json.RawMessage {
	h, _ := json.Marshal(map[string]any{"msg_id": newUUID(), "msg_type": msgType, "username": "carryover",
		"session": ownSession, "date": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "version": "5.3"})
	return h
}

// inSession returns header h with its session set to session.
func inSession(h json.RawMessage, session string) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(h, &m) != nil {
		return h
	}
	m["session"] = session
	out, _ := json.Marshal(m)
	return out
}

func message(channel, msgType string, parent json.RawMessage, content any) kernel.RawMessage {
	c, _ := json.Marshal(content)
	return kernel.RawMessage{Channel: channel, Header: header(msgType), ParentHeader: orEmpty(parent), Metadata: emptyObject, Content: c}
}

func iopubMsg(parent json.RawMessage, msgType string, content any) kernel.RawMessage {
	return message("iopub", msgType, parent, content)
}

func statusMsg(parent json.RawMessage, state string) kernel.RawMessage {
	return iopubMsg(parent, "status", map[string]any{"execution_state": state})
}

func replyMsg(parent json.RawMessage, msgType string, content any) kernel.RawMessage {
	return message("shell", msgType, parent, content)
}

// errorReply is an error reply of type replyType to request req, on req's channel.
func errorReply(req kernel.RawMessage, replyType, ename, evalue string) kernel.RawMessage {
	m := message(req.Channel, replyType, req.Header, map[string]any{"status": "error", "ename": ename, "evalue": evalue,
		"traceback": []string{ename + ": " + evalue}, "execution_count": nil})
	if m.Channel == "" {
		m.Channel = "shell"
	}
	return m
}

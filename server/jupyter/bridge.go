package jupyter

// bridge.go: one kernel's fan-out between its Jupyter websockets and the session's kernel. Replies
// on shell, control and stdin go to the connection that sent the request; iopub goes to every
// connection. Messages whose parent is not a Jupyter client's request (carryover's own silent
// executions: checkpoints, env changes, probes) never reach a Jupyter client.
//
// Nothing a client sends is dropped, even while carryover restores the session's kernel (after its
// restart, a wake, a rotation): shell messages wait in one line, in arrival order, where
// execute_requests run as the session's turns and the others go to the kernel in their place
// (turns.go), as a kernel takes its shell requests one at a time; control and stdin messages wait
// in a line each for a live kernel, without queueing behind the cell in flight (an input_reply, an
// interrupt must reach it). A request that cannot be delivered is answered with an error reply.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// pending is a client request waiting for its reply.
type pending struct {
	c       *conn
	channel string
	msgType string
	header  json.RawMessage
	kern    *kernel.Kernel // the kernel it was sent to (nil until sent): its end fails the request
}

type bridge struct {
	d  *Door
	id string

	mu      sync.Mutex
	conns   map[*conn]bool
	pending map[string]pending       // client msg_id -> who asked (requests only)
	known   idSet                    // client msg_ids: their iopub children are the client's
	held    map[string]chan struct{} // executes whose reply and idle the turn sends (after its checkpoint); closed (then nil) once the kernel's own idle went by
	kern    *kernel.Kernel           // the kernel subscribed to
	ready   chan struct{}            // closed (and replaced) when the bridge attaches a kernel
	unsub   func()
	comms   kernel.CommSet          // the comms open in the kernel, named to the clients when a new kernel lost them
	notice  []kernel.RawMessage     // the lost comms' notice, sent ahead of the new kernel's first message (lostComms)
	queue   []turnJob               // shell messages waiting for their turn, in arrival order
	side    map[string]chan sideMsg // control and stdin messages waiting for a live kernel
	running int                     // shell messages in the turn worker (0 or 1)
	current *turnJob                // the execute in the turn worker, nil when none
	saveMu  sync.Mutex              // serialises saveInflight: the last save holds the latest queue
	wake    chan struct{}
	stop    chan struct{}
	stopped bool

	lostChecked bool // failLost ran

	parked      map[string]*parkedBuf // client sessions with no socket: what they missed (parked.go)
	answers     []answer              // the executes answered lately, oldest first (answered.go)
	kernSession string                // header.session of the kernel's last message: what carryover writes carries it (stamp)

	inflightDirty   chan struct{} // saveInflightLater's request to inflightRecorder
	inflightWritten *string       // the in-flight record last written (guarded by saveMu), nil before the first

	// heldReply, for the executes of held, is closed (then nil) once the kernel's own execute_reply
	// went through fromKernel on the shell line: every shell reply the kernel sent before it (to a
	// complete_request sent ahead of the cell, say) has gone to the clients by then (awaitKernelReply).
	heldReply map[string]chan struct{}
}

func newBridge(d *Door, id string) *bridge {
	b := &bridge{d: d, id: id, conns: map[*conn]bool{}, pending: map[string]pending{}, held: map[string]chan struct{}{},
		known: newIDSet(1 << 14), wake: make(chan struct{}, 1), stop: make(chan struct{}), ready: make(chan struct{}),
		side: map[string]chan sideMsg{}, inflightDirty: make(chan struct{}, 1), heldReply: map[string]chan struct{}{}}
	for _, ch := range []string{"control", "stdin"} {
		b.side[ch] = make(chan sideMsg, sideCap)
		go b.sideWorker(b.side[ch])
	}
	go b.turnWorker()
	go b.inflightRecorder()
	return b
}

func (b *bridge) add(c *conn) {
	b.mu.Lock()
	b.unparkLocked(c)
	b.conns[c] = true
	b.mu.Unlock()
}

// remove forgets a closed connection. Its pending requests stay: their replies go to the client's
// other sockets, or to every connection and are kept for the client until it is back (deliver,
// parkLocked), so a client that reconnected gets them on its new socket.
func (b *bridge) remove(c *conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.parkLocked(c)
	b.mu.Unlock()
}

func (b *bridge) connCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *bridge) busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running > 0 || len(b.queue) > 0
}

func (b *bridge) closeConns(code int, text string) {
	b.mu.Lock()
	all := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		all = append(all, c)
	}
	b.mu.Unlock()
	for _, c := range all {
		c.close(code, text)
	}
}

// close stops the bridge: subscriptions, turn worker and sockets.
func (b *bridge) close() {
	b.mu.Lock()
	if !b.stopped {
		b.stopped = true
		close(b.stop)
	}
	unsub := b.unsub
	b.unsub, b.kern = nil, nil
	b.mu.Unlock()
	if unsub != nil {
		unsub()
	}
	b.closeConns(1000, "kernel shut down")
}

// sideCap is how many control or stdin messages wait for a kernel before the connection's reader
// waits too (the client's socket then pushes back).
const sideCap = 256

// sideMsg is a control or stdin message waiting for a live kernel.
type sideMsg struct {
	c       *conn
	msg     kernel.RawMessage
	msgType string
}

// fromClient routes one client message: shell to the line of turns, control and stdin to their
// own lines, each in arrival order.
func (b *bridge) fromClient(c *conn, m kernel.RawMessage) {
	var h struct {
		MsgID   string `json:"msg_id"`
		MsgType string `json:"msg_type"`
	}
	if err := json.Unmarshal(m.Header, &h); err != nil || h.MsgID == "" {
		b.d.log.Warn("jupyter: message without header.msg_id dropped", "kernel", b.id)
		return
	}
	if m.Channel == "shell" && h.MsgType == "execute_request" && b.duplicate(c, m, h.MsgID) {
		return
	}
	b.mu.Lock()
	b.known.add(h.MsgID)
	if strings.HasSuffix(h.MsgType, "_request") {
		b.pending[h.MsgID] = pending{c: c, channel: m.Channel, msgType: h.MsgType, header: m.Header}
	}
	b.mu.Unlock()
	if m.Channel == "shell" {
		b.enqueue(turnJob{c: c, msg: m, msgID: h.MsgID, msgType: h.MsgType})
		return
	}
	side := b.side[m.Channel]
	if side == nil { // iopub, hb: nothing a kernel takes from a client
		b.failDelivery(c, m, h.MsgType, errors.New("a client cannot send on the "+m.Channel+" channel"))
		return
	}
	select {
	case side <- sideMsg{c: c, msg: m, msgType: h.MsgType}:
	case <-b.stop:
	}
}

// sideWorker sends one channel's messages (control or stdin) in arrival order, each to the
// session's live kernel, waiting for one while carryover restores it.
func (b *bridge) sideWorker(in chan sideMsg) {
	for {
		select {
		case s := <-in:
			b.sendSide(s)
		case <-b.stop:
			return
		}
	}
}

func (b *bridge) sendSide(s sideMsg) {
	ctx := context.Background()
	k, err := b.liveKernel(ctx)
	if err == nil {
		b.attach(k, s.msg.Header)
		b.sentTo(s.msg, k)
		b.comms.Observe(s.msg)
		err = k.SendRaw(ctx, s.msg.Channel, s.msg)
	}
	if err != nil {
		b.failDelivery(s.c, s.msg, s.msgType, err)
	}
}

// liveKernel returns the session's live kernel without queueing behind the cell in flight. While
// the shell line is busy and the session has no live kernel, the turn at its head is restoring
// one: wait for it (attach announces it). With nothing in line, wake the kernel (service.Kernel).
func (b *bridge) liveKernel(ctx context.Context) (*kernel.Kernel, error) {
	for {
		if k := b.d.liveKernelOf(b.id); k != nil {
			return k, nil
		}
		b.mu.Lock()
		ready, inLine, stopped := b.ready, b.running > 0 || len(b.queue) > 0, b.stopped
		b.mu.Unlock()
		if stopped {
			return nil, errors.New("the kernel was shut down")
		}
		if !inLine {
			return b.d.kernelOf(ctx, b.id)
		}
		select {
		case <-ready:
		case <-time.After(250 * time.Millisecond): // the turn may have failed without a kernel
		case <-b.stop:
		}
	}
}

// sentTo notes the kernel a client request went to: that kernel's end fails it (watch).
func (b *bridge) sentTo(m kernel.RawMessage, k *kernel.Kernel) {
	id := msgID(m)
	b.mu.Lock()
	if p, ok := b.pending[id]; ok {
		p.kern = k
		b.pending[id] = p
	}
	b.mu.Unlock()
}

// failDelivery answers a request that could not reach a kernel with an error reply and an idle.
func (b *bridge) failDelivery(c *conn, m kernel.RawMessage, msgType string, err error) {
	if !strings.HasSuffix(msgType, "_request") {
		b.d.log.Warn("jupyter: message not delivered", "kernel", b.id, "type", msgType, "err", err)
		return
	}
	b.d.log.Warn("jupyter: request not delivered; answered with an error", "kernel", b.id, "type", msgType, "err", err)
	b.mu.Lock()
	delete(b.pending, msgID(m))
	b.mu.Unlock()
	e := carryover.ErrorOf(err)
	b.deliver(c, errorReply(m, strings.TrimSuffix(msgType, "_request")+"_reply", "KernelUnavailable", e.Message))
	b.broadcast(statusMsg(m.Header, "idle"))
}

// attach subscribes to k's channels when it is not the kernel the bridge listens to already. A
// kernel that replaces another lost the comms open in it: the clients are told (lostComms), under
// parent, the request that met the new kernel (nil when none did).
func (b *bridge) attach(k *kernel.Kernel, parent json.RawMessage) {
	select {
	case <-k.Dead(): // a stale kernel (a sender raced its replacement): keep listening to the new one
		return
	default:
	}
	if lost := b.comms.Switch(k); len(lost) > 0 {
		b.lostComms(lost, parent)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kern == k || b.stopped {
		return
	}
	if b.unsub != nil {
		b.unsub()
	}
	var cancels []func()
	for _, ch := range []string{"iopub", "shell", "control", "stdin"} {
		msgs, cancel, err := k.Subscribe(ch)
		if err != nil {
			continue
		}
		cancels = append(cancels, cancel)
		go func() {
			for m := range msgs {
				b.fromKernel(m)
			}
		}()
	}
	b.kern = k
	b.unsub = func() {
		for _, c := range cancels {
			c()
		}
	}
	close(b.ready)
	b.ready = make(chan struct{})
	go b.watch(k)
}

// lostComms closes, for the clients, the comms a new kernel does not have, and says so: a stderr
// stream naming them (shown in the cell that met the new kernel) and a comm_close each, so widget
// managers drop models whose kernel side is gone instead of talking to nothing. They go out just
// before the new kernel's first message, in its session (sendNotice): JupyterLab drops a comm
// message whose session is not the one of the last message it received.
func (b *bridge) lostComms(lost []kernel.Comm, parent json.RawMessage) {
	b.d.log.Info("jupyter: comms lost with the kernel they lived in", "kernel", b.id, "count", len(lost))
	msgs := []kernel.RawMessage{iopubMsg(parent, "stream", map[string]any{"name": "stderr", "text": kernel.LostCommsText(lost)})}
	for _, cm := range lost {
		msgs = append(msgs, iopubMsg(parent, "comm_close", map[string]any{"comm_id": cm.ID, "data": map[string]any{}}))
	}
	b.mu.Lock()
	b.notice = append(b.notice, msgs...)
	b.mu.Unlock()
}

// sendNoticeLocked sends the pending lost-comms notice, in the session of m, the new kernel's first
// message. The caller holds b.mu.
func (b *bridge) sendNoticeLocked(m kernel.RawMessage) {
	var h struct {
		Session string `json:"session"`
	}
	_ = json.Unmarshal(m.Header, &h)
	for _, n := range b.notice {
		if h.Session != "" {
			n.Header = inSession(n.Header, h.Session)
		}
		b.keepLocked(n)
		for c := range b.conns {
			c.send(n)
		}
	}
	b.notice = nil
}

// watch tells the clients about k's death (not a shutdown on purpose: hibernation, rotation,
// restart, close are invisible) and follows the session to its restored kernel.
func (b *bridge) watch(k *kernel.Kernel) {
	select {
	case <-k.Dead():
	case <-b.stop:
		return
	}
	var de *kernel.DiedError
	if errors.As(k.Err(), &de) && de.Reason == "shutdown" {
		// Replaced on purpose (hibernation, rotation, restart): a request it took and did not answer
		// never will be.
		b.failPending(k, "KernelRestarted", "the kernel was replaced (hibernation, rotation or restart) before it answered; send the request again")
		return
	}
	b.broadcastStatus("restarting")
	b.failPending(nil, "KernelDied", "the kernel died; carryover restores the session from its last checkpoint")
	k2, err := b.d.kernelOf(context.Background(), b.id)
	if err != nil {
		b.d.log.Warn("jupyter: kernel not restored after its death", "kernel", b.id, "err", err)
		b.broadcastStatus("dead")
		return
	}
	b.attach(k2, nil)
	b.broadcastStatus("starting")
	b.broadcastStatus("idle")
}

// fromKernel routes one kernel message to the clients it belongs to.
func (b *bridge) fromKernel(m kernel.RawMessage) {
	pid := m.ParentID()
	typ := m.Type()
	sess := headerSession(m.Header)
	b.mu.Lock()
	if sess != "" {
		b.kernSession = sess
	}
	if len(b.notice) > 0 {
		b.sendNoticeLocked(m)
	}
	if pid != "" && !b.known.has(pid) {
		b.mu.Unlock()
		return // carryover's own request: not the clients' business
	}
	if ch, held := b.held[pid]; held && ((m.Channel == "iopub" && typ == "status" && m.ExecutionState() == "idle") ||
		(m.Channel == "shell" && typ == "execute_reply")) {
		if m.Channel == "iopub" && ch != nil {
			close(ch) // every output before it has been forwarded (awaitKernelIdle)
			b.held[pid] = nil
		}
		if rc := b.heldReply[pid]; m.Channel == "shell" && rc != nil {
			close(rc) // every shell reply before it has been forwarded (awaitKernelReply)
			b.heldReply[pid] = nil
		}
		b.mu.Unlock()
		return // the turn sends these after its checkpoint
	}
	if m.Channel == "iopub" {
		b.comms.Observe(m)
		b.keepLocked(m)
		all := make([]*conn, 0, len(b.conns))
		for c := range b.conns {
			all = append(all, c)
		}
		b.mu.Unlock()
		for _, c := range all {
			c.send(m)
		}
		return
	}
	p, ok := b.pending[pid]
	if _, held := b.held[pid]; ok && strings.HasSuffix(typ, "_reply") && !held {
		delete(b.pending, pid)
	}
	b.mu.Unlock()
	if ok {
		b.deliver(p.c, m)
	}
}

// broadcast sends m to every connection.
func (b *bridge) broadcast(m kernel.RawMessage) {
	b.mu.Lock()
	m = b.stampLocked(m)
	b.keepLocked(m)
	all := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		all = append(all, c)
	}
	b.mu.Unlock()
	for _, c := range all {
		c.send(m)
	}
}

// broadcastStatus sends an iopub status without a parent (the kernel's own state).
func (b *bridge) broadcastStatus(state string) {
	b.broadcast(statusMsg(nil, state))
}

// failPending answers every request still waiting for kernel k (nil: for any kernel), not executes
// (their turns answer them), with an error reply, so no client waits forever for a kernel that
// died or was replaced.
func (b *bridge) failPending(k *kernel.Kernel, ename, evalue string) {
	b.mu.Lock()
	var fail []pending
	for id, p := range b.pending {
		if _, held := b.held[id]; !held && p.msgType != "execute_request" && p.kern != nil && (k == nil || p.kern == k) {
			fail = append(fail, p)
			delete(b.pending, id)
		}
	}
	b.mu.Unlock()
	for _, p := range fail {
		req := kernel.RawMessage{Channel: p.channel, Header: p.header}
		b.deliver(p.c, errorReply(req, strings.TrimSuffix(p.msgType, "_request")+"_reply", ename, evalue))
		b.broadcast(statusMsg(p.header, "idle"))
	}
}

// stampLocked gives a message carryover wrote itself (header session "carryover") the session of
// the kernel's messages, when one is known. JupyterLab's KernelConnection takes the session of
// every message it receives as the kernel's, and cancels the handling of a comm message, and the
// iopub signal of any message, whose session is no longer that one by the time it is handled: a
// notice of carryover's between two comm messages of the kernel lost the first. The caller holds
// b.mu.
func (b *bridge) stampLocked(m kernel.RawMessage) kernel.RawMessage {
	if b.kernSession != "" && headerSession(m.Header) == ownSession {
		m.Header = inSession(m.Header, b.kernSession)
	}
	return m
}

// headerSession is h's session.
func headerSession(h json.RawMessage) string {
	var v struct {
		Session string `json:"session"`
	}
	_ = json.Unmarshal(h, &v)
	return v.Session
}

// msgID is m's header.msg_id.
func msgID(m kernel.RawMessage) string {
	var h struct {
		MsgID string `json:"msg_id"`
	}
	_ = json.Unmarshal(m.Header, &h)
	return h.MsgID
}

// idSet is a bounded set of message ids: the oldest go first.
type idSet struct {
	m    map[string]bool
	ring []string
	next int
}

func newIDSet(n int) idSet { return idSet{m: make(map[string]bool, n), ring: make([]string, n)} }

func (s *idSet) add(id string) {
	if s.m[id] {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.m[id] = true
}

func (s *idSet) has(id string) bool { return s.m[id] }

package jupyter

// bridge.go: one kernel's fan-out between its Jupyter websockets and the session's kernel. Replies
// on shell, control and stdin go to the connection that sent the request; iopub goes to every
// connection. Messages whose parent is not a Jupyter client's request (carryover's own silent
// executions: checkpoints, env changes, probes) never reach a Jupyter client. execute_requests run
// one at a time, in arrival order, as the session's turns (turns.go).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/carryover/carryover/kernel"
)

// pending is a client request waiting for its reply.
type pending struct {
	c       *conn
	channel string
	msgType string
	header  json.RawMessage
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
	unsub   func()
	queue   []turnJob  // executes waiting for their turn
	running int        // executes in the turn worker (0 or 1)
	current *turnJob   // the execute in the turn worker, nil when none
	saveMu  sync.Mutex // serialises saveInflight: the last save holds the latest queue
	wake    chan struct{}
	stop    chan struct{}
	stopped bool

	lostChecked bool // failLost ran
}

func newBridge(d *Door, id string) *bridge {
	b := &bridge{d: d, id: id, conns: map[*conn]bool{}, pending: map[string]pending{}, held: map[string]chan struct{}{},
		known: newIDSet(1 << 14), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	go b.turnWorker()
	return b
}

func (b *bridge) add(c *conn) {
	b.mu.Lock()
	b.conns[c] = true
	b.mu.Unlock()
}

func (b *bridge) remove(c *conn) {
	b.mu.Lock()
	delete(b.conns, c)
	for id, p := range b.pending {
		if p.c == c {
			delete(b.pending, id)
		}
	}
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

// fromClient routes one client message: executes to the turn queue, the rest to the kernel raw.
func (b *bridge) fromClient(c *conn, m kernel.RawMessage) {
	var h struct {
		MsgID   string `json:"msg_id"`
		MsgType string `json:"msg_type"`
	}
	if err := json.Unmarshal(m.Header, &h); err != nil || h.MsgID == "" {
		b.d.log.Warn("jupyter: message without header.msg_id dropped", "kernel", b.id)
		return
	}
	b.mu.Lock()
	b.known.add(h.MsgID)
	if strings.HasSuffix(h.MsgType, "_request") {
		b.pending[h.MsgID] = pending{c: c, channel: m.Channel, msgType: h.MsgType, header: m.Header}
	}
	b.mu.Unlock()
	if m.Channel == "shell" && h.MsgType == "execute_request" {
		b.enqueue(turnJob{c: c, msg: m, msgID: h.MsgID})
		return
	}
	go b.passThrough(c, m, h.MsgType)
}

// passThrough sends a non-execute message to the session's kernel (waking it if needed).
func (b *bridge) passThrough(c *conn, m kernel.RawMessage, msgType string) {
	ctx := context.Background()
	k, err := b.d.svc.Kernel(ctx, b.id)
	if err == nil {
		b.attach(k)
		err = k.SendRaw(ctx, m.Channel, m)
	}
	if err != nil && strings.HasSuffix(msgType, "_request") {
		b.d.log.Warn("jupyter: message not delivered", "kernel", b.id, "type", msgType, "err", err)
		c.send(errorReply(m, strings.TrimSuffix(msgType, "_request")+"_reply", "KernelUnavailable", err.Error()))
	}
}

// attach subscribes to k's channels when it is not the kernel the bridge listens to already.
func (b *bridge) attach(k *kernel.Kernel) {
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
	go b.watch(k)
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
		return
	}
	b.broadcastStatus("restarting")
	b.failPending("KernelDied", "the kernel died; carryover restores the session from its last checkpoint")
	k2, err := b.d.svc.Kernel(context.Background(), b.id)
	if err != nil {
		b.d.log.Warn("jupyter: kernel not restored after its death", "kernel", b.id, "err", err)
		b.broadcastStatus("dead")
		return
	}
	b.attach(k2)
	b.broadcastStatus("starting")
	b.broadcastStatus("idle")
}

// fromKernel routes one kernel message to the clients it belongs to.
func (b *bridge) fromKernel(m kernel.RawMessage) {
	pid := m.ParentID()
	typ := m.Type()
	b.mu.Lock()
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
		b.mu.Unlock()
		return // the turn sends these after its checkpoint
	}
	if m.Channel == "iopub" {
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

func (b *bridge) hasConn(c *conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[c]
}

// broadcast sends m to every connection.
func (b *bridge) broadcast(m kernel.RawMessage) {
	b.mu.Lock()
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

// failPending answers every request still waiting (not executes: their turns answer them) with an
// error reply, so no client waits forever for a kernel that died.
func (b *bridge) failPending(ename, evalue string) {
	b.mu.Lock()
	var fail []pending
	for id, p := range b.pending {
		if _, held := b.held[id]; !held && p.msgType != "execute_request" {
			fail = append(fail, p)
			delete(b.pending, id)
		}
	}
	b.mu.Unlock()
	for _, p := range fail {
		req := kernel.RawMessage{Channel: p.channel, Header: p.header}
		p.c.send(errorReply(req, strings.TrimSuffix(p.msgType, "_request")+"_reply", ename, evalue))
		p.c.send(statusMsg(p.header, "idle"))
	}
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

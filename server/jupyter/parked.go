package jupyter

// parked.go: what a client misses while it has no websocket. A client's sockets carry the
// session_id of its channels URL (JupyterLab's KernelConnection sends its clientId, the same on
// every reconnect). When the last socket of a client session closes, the messages meant for every
// connection (iopub, and replies whose connection is gone) are kept for it, with what its socket
// had not written yet, and replayed in order when a socket of that session comes back, as Jupyter
// Server does (its kernel manager's buffering). Without it a reply that came while the client was
// between two sockets was lost, and its future waited forever: JupyterLab drops a working socket
// and reconnects 0-1 s later when its deferred kernel-model check (10-30 s after a failed
// reconnect attempt) fires.

import (
	"time"

	"github.com/carryover/carryover/kernel"
)

const (
	parkTTL = 2 * time.Minute // a client away longer is taken for gone: its messages are dropped
	parkCap = 1 << 14         // messages kept per client session (a connection's queue holds as many)
	parkMax = 64 << 20        // bytes kept per client session: a cell's output can be 50 MB
)

// parkedBuf is what a client session missed since its last socket closed.
type parkedBuf struct {
	msgs  []kernel.RawMessage
	size  int
	until time.Time
}

// parkLocked starts keeping messages for c's client session when c was its last socket, with the
// messages c had not written. A client with another socket has had on it what c had (deliver and
// broadcast reach all its sockets). The caller holds b.mu, and c is out of b.conns.
func (b *bridge) parkLocked(c *conn) {
	if c.sid == "" {
		return
	}
	for o := range b.conns {
		if o.sid == c.sid {
			return
		}
	}
	unsent := drain(c.out)
	if b.parked == nil {
		b.parked = map[string]*parkedBuf{}
	}
	p := &parkedBuf{msgs: unsent, until: time.Now().Add(parkTTL)}
	for _, m := range unsent {
		p.size += msgSize(m)
	}
	b.parked[c.sid] = p
}

// keepLocked adds m, a message that goes to every connection, to what each away client session
// will be given back; a session away too long, or that missed too much, is dropped. The caller
// holds b.mu.
func (b *bridge) keepLocked(m kernel.RawMessage) {
	now := time.Now()
	for sid, p := range b.parked {
		if now.After(p.until) || len(p.msgs) >= parkCap || p.size+msgSize(m) > parkMax {
			b.d.log.Info("jupyter: a client session away too long; what it missed is dropped", "kernel", b.id, "messages", len(p.msgs))
			delete(b.parked, sid)
			continue
		}
		p.msgs = append(p.msgs, m)
		p.size += msgSize(m)
	}
}

// msgSize is about what m holds in memory.
func msgSize(m kernel.RawMessage) int {
	n := len(m.Header) + len(m.ParentHeader) + len(m.Metadata) + len(m.Content)
	for _, b := range m.Buffers {
		n += len(b)
	}
	return n
}

// unparkLocked gives a socket of a client session that was away what it missed, before anything
// else. The caller holds b.mu.
func (b *bridge) unparkLocked(c *conn) {
	p := b.parked[c.sid]
	if c.sid == "" || p == nil {
		return
	}
	delete(b.parked, c.sid)
	if time.Now().After(p.until) {
		return
	}
	for _, m := range p.msgs {
		c.send(m)
	}
}

// drain takes what is queued in ch now.
func drain(ch chan kernel.RawMessage) []kernel.RawMessage {
	var out []kernel.RawMessage
	for {
		select {
		case m := <-ch:
			out = append(out, m)
		default:
			return out
		}
	}
}

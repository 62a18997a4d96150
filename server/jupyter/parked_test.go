package jupyter

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/carryover/carryover/kernel"
)

func testBridge() *bridge {
	return &bridge{d: &Door{log: slog.New(slog.DiscardHandler)}, conns: map[*conn]bool{}}
}

func testConn(sid string) *conn {
	return &conn{sid: sid, out: make(chan kernel.RawMessage, 16), done: make(chan struct{})}
}

func ids(ch chan kernel.RawMessage) []string {
	var out []string
	for _, m := range drain(ch) {
		out = append(out, msgID(m))
	}
	return out
}

// TestParkedUntilBack: a client session whose last socket closed gets back, on its next socket and
// before anything else, what its old socket had not written and what went to every connection
// meanwhile (a reply whose socket was gone included); another client's socket does not get them
// twice, and a client that still has a socket parks nothing.
func TestParkedUntilBack(t *testing.T) {
	b := testBridge()
	old, other := testConn("A"), testConn("B")
	b.add(old)
	b.add(other)
	queued := replyMsg(nil, "kernel_info_reply", map[string]any{})
	old.send(queued) // queued, never written: the socket closes
	unsent := msgID(queued)
	b.remove(old)
	_ = ids(other.out)
	iop := iopubMsg(nil, "stream", map[string]any{"name": "stdout", "text": "7\n"})
	b.broadcast(iop)
	reply := replyMsg(nil, "execute_reply", map[string]any{"status": "ok"})
	b.deliver(old, reply) // the socket that asked is gone: every connection, and kept for A
	if got := ids(other.out); len(got) != 2 {
		t.Errorf("the other client got %v, want the stream and the reply once each", got)
	}
	back := testConn("A")
	b.add(back)
	want := []string{unsent, msgID(iop), msgID(reply)}
	if got := ids(back.out); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("the client back got %v, want %v", got, want)
	}
	// Two sockets of one client: closing one parks nothing, and a reply reaches the live one.
	second := testConn("A")
	b.add(second)
	b.remove(back)
	if len(b.parked) != 0 {
		t.Errorf("a client with a live socket was parked: %v", b.parked)
	}
	b.deliver(back, reply)
	if got := ids(second.out); len(got) != 1 {
		t.Errorf("the client's live socket got %v, want the reply", got)
	}
}

// TestStampedWithKernelSession: what carryover writes itself carries the kernel's session once one
// is known; the kernel's own messages keep theirs.
func TestStampedWithKernelSession(t *testing.T) {
	b := testBridge()
	m := statusMsg(nil, "restarting")
	if s := headerSession(b.stampLocked(m).Header); s != ownSession {
		t.Errorf("with no kernel session known: %q", s)
	}
	b.kernSession = "k-1"
	if s := headerSession(b.stampLocked(m).Header); s != "k-1" {
		t.Errorf("carryover's own status carries %q, want the kernel's k-1", s)
	}
	km := kernel.RawMessage{Header: json.RawMessage(`{"msg_id":"x","session":"k-0"}`)}
	if s := headerSession(b.stampLocked(km).Header); s != "k-0" {
		t.Errorf("a kernel message's session was changed to %q", s)
	}
}

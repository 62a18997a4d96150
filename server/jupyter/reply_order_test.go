package jupyter

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/carryover/carryover/kernel"
)

// kernelReply is a reply the kernel sent on channel to the client request parent.
func kernelReply(channel, msgType, parent string) kernel.RawMessage {
	h, _ := json.Marshal(map[string]string{"msg_id": "k-" + parent, "msg_type": msgType, "session": "kernel"})
	ph, _ := json.Marshal(map[string]string{"msg_id": parent})
	return kernel.RawMessage{Channel: channel, Header: h, ParentHeader: ph, Metadata: json.RawMessage("{}"),
		Content: json.RawMessage(`{"status":"ok"}`)}
}

// TestACellsReplyWaitsForTheShellRepliesBeforeIt: the turn has its cell's execute_reply from the
// kernel itself, while the reply to a request the client sent ahead of the cell (complete_request)
// reaches the client through the bridge's shell subscription. When that subscription runs behind (a
// loaded machine), the cell's reply waits for it (awaitKernelReply) and goes out second, in the
// order the client sent the two requests.
func TestACellsReplyWaitsForTheShellRepliesBeforeIt(t *testing.T) {
	b := newBridge(&Door{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, "k")
	t.Cleanup(b.close)
	c := &conn{out: make(chan kernel.RawMessage, 8), done: make(chan struct{})}
	b.mu.Lock()
	b.conns[c] = true
	for id, typ := range map[string]string{"complete-1": "complete_request", "cell-2": "execute_request"} {
		b.known.add(id)
		b.pending[id] = pending{c: c, channel: "shell", msgType: typ}
	}
	b.held["cell-2"] = make(chan struct{})
	b.heldReply["cell-2"] = make(chan struct{})
	b.mu.Unlock()
	go func() {
		time.Sleep(100 * time.Millisecond) // the subscription, behind the turn
		b.fromKernel(kernelReply("shell", "complete_reply", "complete-1"))
		b.fromKernel(kernelReply("shell", "execute_reply", "cell-2"))
	}()
	b.awaitKernelReply("cell-2")
	b.mu.Lock()
	signalled := b.heldReply["cell-2"] == nil
	b.mu.Unlock()
	if !signalled {
		t.Fatal("awaitKernelReply returned before the kernel's execute_reply went through the bridge (its grace ran out)")
	}
	b.deliver(c, kernelReply("shell", "execute_reply", "cell-2"))
	var got []string
	for range 2 {
		select {
		case m := <-c.out:
			got = append(got, m.ParentID())
		case <-time.After(5 * time.Second):
			t.Fatalf("replies sent: %v, want two", got)
		}
	}
	if got[0] != "complete-1" || got[1] != "cell-2" {
		t.Fatalf("replies in the order %v, want [complete-1 cell-2] (the order the client sent them)", got)
	}
	select {
	case m := <-c.out:
		t.Fatalf("a second reply to %s: the kernel's own execute_reply must not go out (the turn sends it)", m.ParentID())
	case <-time.After(50 * time.Millisecond):
	}
}

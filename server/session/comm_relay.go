package session

// comm_relay.go relays Jupyter comm messages between a session's kernel and its stream's subscribers
// (the browser UI's widget manager): the kernel's comm_open, comm_msg and comm_close go out as
// "comm" frames, with their binary buffers; a client's go to the kernel's shell through SendComm.
// The outputs an Output widget captures (`with out:`, interact's callbacks) go out as
// "comm_output" frames instead of the cell's: those of a cell through the run (cellOptions, in
// order with its outputs), those of a client's comm_msg through the relay. Comms live in the kernel: a new kernel (a wake, a restart after a death, a
// rotation) has none, and the relay says so with a "comm_reset" frame.

import (
	"context"
	"fmt"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/comms"
	"github.com/carryover/carryover/server/session/stream"
)

// CommRequest is what a client sends to the kernel: a comm_open, comm_msg or comm_close.
type CommRequest = comms.Request

// SendComm sends a client's comm message to the session's live kernel. It does not wait for the run
// lock (a slider moves while a cell runs; the kernel queues it) and starts no kernel: a session
// without a live kernel has no comms, which is a conflict.
func (ls *Session) SendComm(ctx context.Context, req CommRequest) (msgID string, err error) {
	if err := req.Check(); err != nil {
		return "", err
	}
	ls.mu.Lock()
	k := ls.kern
	ls.mu.Unlock()
	if k == nil {
		return "", carryover.Errorf(carryover.CodeConflict,
			"session %q has no live kernel: widgets live in the kernel that drew them (run the cell again)", ls.id)
	}
	msg, msgID := req.Message(ls.id)
	if err := k.SendRaw(ctx, "shell", msg); err != nil {
		return "", fmt.Errorf("comm to the kernel: %w", err)
	}
	if req.MsgType == "comm_msg" {
		ls.widgetsMoved(k) // widget_checkpoint.go: saved without a cell
	}
	return msgID, nil
}

// relayComms starts forwarding k's comm traffic to ls's subscribers until k dies. It runs once per
// kernel attached to the session (attachNew, a checkpoint restore) and subscribes before it returns:
// the caller runs the cell next, and a comm_open that cell sends before a late subscription would
// never reach the clients (a loaded machine did that).
func (ls *Session) relayComms(k *kernel.Kernel) {
	msgs, cancel, err := k.Subscribe("iopub")
	if err != nil {
		ls.svc.log.Warn("comm relay", "session", ls.id, "err", err)
		return
	}
	go ls.forwardComms(k, msgs, cancel)
}

// forwardComms first tells clients that earlier widgets are gone, then forwards the comm frames of
// k's iopub messages until k dies.
func (ls *Session) forwardComms(k *kernel.Kernel, msgs <-chan kernel.RawMessage, cancel func()) {
	defer cancel()
	ls.hub.BroadcastComms(stream.CommResetFrame{Type: "comm_reset",
		Message: "a new kernel started: the widgets come back from the last checkpoint"})
	if ls.hub.HasComms() {
		go ls.syncWidgets(context.Background(), k, ls.hub.BroadcastComms) // widget_sync.go: the restore re-created them
	}
	var r stream.CommRelay
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if f := r.Frame(m); f != nil {
				ls.hub.BroadcastComms(f)
			}
		case <-k.Dead():
			return
		}
	}
}

package session

// widget_sync.go: the live widgets sent to a page that draws them: a page that connects (a reload)
// and a page that saw the kernel die get the kernel's live widgets as comm_open frames (comms.Live).

import (
	"context"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session/comms"
	"github.com/carryover/carryover/server/session/stream"
)

// widgetSyncTimeout bounds the wait for the kernel (a cell running) and its answer.
const widgetSyncTimeout = 2 * time.Minute

// SyncWidgets sends the session's live widgets to sub (a page that just connected), when its kernel
// is live; it never starts a kernel and waits its turn behind a running cell.
func (ls *Session) SyncWidgets(ctx context.Context, sub *stream.Subscriber) {
	if k := ls.currentKernel(); k != nil {
		ls.syncWidgets(ctx, k, func(v any) { sub.Send(v) })
	}
}

// syncWidgets asks kernel k for its live widgets (under the run lock, so it does not race a turn)
// and hands each to send as a comm_open frame. Nothing is sent when k is no longer the session's.
func (ls *Session) syncWidgets(ctx context.Context, k *kernel.Kernel, send func(any)) {
	ctx, cancel := context.WithTimeout(ctx, widgetSyncTimeout)
	defer cancel()
	go func() { // a kernel that dies meanwhile has nothing to send
		select {
		case <-k.Dead():
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := ls.lock.Lock(ctx); err != nil {
		return
	}
	defer ls.lock.Unlock()
	if ls.currentKernel() != k {
		return
	}
	frames, err := comms.Live(ctx, k)
	if err != nil {
		ls.svc.log.Warn("widget sync", "session", ls.id, "err", err)
		return
	}
	for _, f := range frames {
		send(f)
	}
}

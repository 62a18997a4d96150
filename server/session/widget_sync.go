package session

// widget_sync.go: the live widgets sent to a page that draws them. Widgets come back with a restore
// (the agent re-creates them with their model ids: persistence/agent/carryover_agent/widgetstate.py),
// but the page hears a widget's comm_open only while it listens: a page that connects (a reload) and
// a page that saw the kernel die get the kernel's live widgets as comm_open frames, each with what
// its Output widget shows. Such a frame says so in its metadata ("carryover_sync": true); a page
// that already has the model ignores it.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/persistence"
	"github.com/carryover/carryover/server/session/stream"
)

// widgetSyncTimeout bounds the wait for the kernel (a cell running) and its answer.
const widgetSyncTimeout = 2 * time.Minute

// widgetModel is one live widget as the agent's "widgets" op lists it (children before parents).
type widgetModel struct {
	CommID  string          `json:"comm_id"`
	Data    json.RawMessage `json:"data"`
	Outputs json.RawMessage `json:"outputs,omitempty"`
}

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
	var ans struct {
		Models []widgetModel `json:"models"`
	}
	if err := persistence.CallAgent(ctx, k, "widgets", map[string]any{}, &ans); err != nil {
		ls.svc.log.Warn("widget sync", "session", ls.id, "err", err)
		return
	}
	for _, m := range ans.Models {
		content, err := json.Marshal(map[string]any{"comm_id": m.CommID, "target_name": "jupyter.widget", "data": m.Data})
		if err != nil {
			continue
		}
		md := map[string]any{"carryover_sync": true}
		if len(m.Outputs) > 0 {
			md["outputs"] = m.Outputs
		}
		meta, _ := json.Marshal(md)
		send(stream.CommFrame{Type: "comm", MsgType: "comm_open", MsgID: "carryover-sync-" + m.CommID, Content: content, Metadata: meta})
	}
}

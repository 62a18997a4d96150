package session

// widget_checkpoint.go: a widget a page moves is saved without a cell. A slider set to 13 changes
// the kernel (its value, what interact printed) through comm messages, not a turn, so no turn's
// checkpoint would hold it: a kill -9 before the next cell would bring back the old value. So the
// relay's client comm_msg arms a checkpoint widgetCheckpointDelay after the last one (a drag is
// many messages, one checkpoint), taken when no turn holds the session (a turn's own checkpoint
// follows it anyway, but a message that came while its cell ran may be after its snapshot: the
// timer is armed again until the session is free).

import (
	"context"
	"sync"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
)

// widgetCheckpointDelay is how long after a page's last widget message its checkpoint is taken.
const widgetCheckpointDelay = time.Second

// widgetCheckpointTimeout bounds one such checkpoint.
const widgetCheckpointTimeout = 2 * time.Minute

// widgetSaves holds the armed timer of each session (*Session -> *time.Timer); the entry goes
// when its checkpoint is taken or its kernel is gone.
var widgetSaves sync.Map

// widgetsMoved arms (or pushes back) the widget checkpoint of kernel k.
func (ls *Session) widgetsMoved(k *kernel.Kernel) {
	t := time.AfterFunc(widgetCheckpointDelay, func() { ls.saveWidgets(k) })
	if old, loaded := widgetSaves.Swap(ls, t); loaded {
		old.(*time.Timer).Stop()
	}
}

// saveWidgets checkpoints the session if k is still its kernel and no turn holds it; a busy session
// has the timer armed again.
func (ls *Session) saveWidgets(k *kernel.Kernel) {
	if ls.currentKernel() != k {
		widgetSaves.Delete(ls)
		return
	}
	if !ls.lock.TryLock() {
		ls.widgetsMoved(k)
		return
	}
	defer ls.lock.Unlock()
	widgetSaves.Delete(ls)
	if ls.currentKernel() != k {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), widgetCheckpointTimeout)
	defer cancel()
	res, err := ls.checkpoint(ctx, k)
	if err != nil {
		ls.svc.log.Warn("checkpoint after a widget change", "session", ls.id, "err", err)
		return
	}
	ls.emit(ctx, carryover.EventCheckpointCreated, res)
}

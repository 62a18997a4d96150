package session

// control.go: a client's hands on the session's kernel outside a turn: interrupt the run in
// flight, or restart into a new kernel with the last checkpoint.

import (
	"context"
	"sync"

	"github.com/carryover/carryover"
)

// cellTurn is a run holding the session (the tag of its run lock, beginTurnAs): whether the kernel
// has started its cell, and whether an interrupt waits for that. Guarded by Session.mu.
type cellTurn struct{ started, interrupt bool }

// commandTurn is a shell command holding the session (the tag of its run lock): an interrupt kills
// the command (its answer says interrupted), as Ctrl-C stops a terminal's.
type commandTurn struct {
	stop chan struct{}
	once sync.Once
}

// Interrupt interrupts the run in flight, if any. A run whose cell the kernel has not started yet
// (its kernel starting or waking, its request on the way) has it interrupted as the cell starts
// (cellStarted): a kernel ignores an interrupt between cells, and the cell would run to its end.
// A shell command in flight is killed.
func (ls *Session) Interrupt(ctx context.Context) error {
	if ct, ok := ls.lock.Holder().(*commandTurn); ok {
		ct.once.Do(func() { close(ct.stop) })
		return nil
	}
	if ct, ok := ls.lock.Holder().(*cellTurn); ok {
		ls.mu.Lock()
		wait := !ct.started
		ct.interrupt = ct.interrupt || wait
		ls.mu.Unlock()
		if wait {
			return nil
		}
	}
	if k := ls.currentKernel(); k != nil {
		return k.Interrupt(ctx)
	}
	return nil
}

// cellStarted is called when the kernel starts a cell (kernel.ExecOptions.OnStart): the interrupt
// that waited for the run's cell is sent now, from a goroutine of its own (this one delivers the
// kernel's messages).
func (ls *Session) cellStarted() {
	ct, ok := ls.lock.Holder().(*cellTurn)
	if !ok {
		return
	}
	ls.mu.Lock()
	due := ct.interrupt && !ct.started
	ct.started = true
	k := ls.kern
	ls.mu.Unlock()
	if due && k != nil {
		go func() { _ = k.Interrupt(context.Background()) }()
	}
}

// Restart gives the session a new kernel with its last checkpoint restored.
func (ls *Session) Restart(ctx context.Context) (carryover.Session, error) {
	if ls.lock.Busy() {
		_ = ls.Interrupt(ctx)
	}
	if err := ls.lock.Lock(ctx); err != nil {
		return carryover.Session{}, err
	}
	defer ls.lock.Unlock()
	if doc := ls.docCopy(); doc.Closed() {
		return carryover.Session{}, carryover.Errorf(carryover.CodeSessionClosed, "session is %s", doc.State)
	}
	ls.releaseKernel(ctx, "restart requested")
	if _, err := ls.ensureKernel(ctx); err != nil {
		return carryover.Session{}, err
	}
	return ls.docCopy(), nil
}

package session

// control.go: a client's hands on the session's kernel outside a turn: interrupt the run in
// flight, or restart into a new kernel with the last checkpoint.

import (
	"context"

	"github.com/carryover/carryover"
)

// Interrupt interrupts the run in flight, if any.
func (ls *Session) Interrupt(ctx context.Context) error {
	if k := ls.currentKernel(); k != nil {
		return k.Interrupt(ctx)
	}
	return nil
}

// Restart gives the session a new kernel with its last checkpoint restored.
func (ls *Session) Restart(ctx context.Context) (carryover.Session, error) {
	if k := ls.currentKernel(); k != nil && ls.lock.Busy() {
		_ = k.Interrupt(ctx)
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

package jupyter

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/kernel"
	"github.com/carryover/carryover/server/session"
)

// Sessions is what the Jupyter front door asks of the session service (*session.Service): kernels
// are sessions, an execute_request is a turn (RunRaw), other shell messages go to the kernel in the
// turns' line (SendInLine), control and stdin to the live kernel at once.
type Sessions interface {
	Create(ctx context.Context, req session.CreateRequest) (carryover.Session, error)
	Get(id string) (carryover.Session, error)
	List() []carryover.Session
	Patch(ctx context.Context, id string, data map[string]any) (carryover.Session, error)
	Stop(ctx context.Context, id, reason string) (carryover.Session, error)
	// Session is the handle of session id: its turns (RunRaw, SendInLine), its kernel, interrupt
	// and restarts.
	Session(id string) (*session.Session, error)
}

var _ Sessions = (*session.Service)(nil)

// onSession calls fn with the handle of session id.
func (d *Door) onSession(id string, fn func(*session.Session) error) error {
	ls, err := d.svc.Session(id)
	if err != nil {
		return err
	}
	return fn(ls)
}

// kernelOf is session id's kernel for messages that are not turns (session.Session.Kernel).
func (d *Door) kernelOf(ctx context.Context, id string) (*kernel.Kernel, error) {
	ls, err := d.svc.Session(id)
	if err != nil {
		return nil, err
	}
	return ls.Kernel(ctx)
}

// liveKernelOf is session id's live kernel, nil when it has none or there is no such session
// (session.Session.LiveKernel).
func (d *Door) liveKernelOf(id string) *kernel.Kernel {
	ls, err := d.svc.Session(id)
	if err != nil {
		return nil
	}
	return ls.LiveKernel()
}

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
	Interrupt(ctx context.Context, id string) error
	Restart(ctx context.Context, id string) (carryover.Session, error)
	RestartFresh(ctx context.Context, id string) error
	Kernel(ctx context.Context, id string) (*kernel.Kernel, error)
	LiveKernel(id string) *kernel.Kernel
	RunRaw(ctx context.Context, id string, req kernel.RawMessage, opts session.RawTurnOptions) (*session.RawTurn, error)
	SendInLine(ctx context.Context, id string, msg kernel.RawMessage, onKernel func(*kernel.Kernel)) error
}

var _ Sessions = (*session.Service)(nil)

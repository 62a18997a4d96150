package httpapi

import (
	"context"
	"io"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
	"github.com/carryover/carryover/server/session"
	"github.com/carryover/carryover/server/session/nodewatch"
	"github.com/carryover/carryover/server/session/skills"
	"github.com/carryover/carryover/server/session/workspace"
)

// Sessions is what carryover's own front door asks of the session service (*session.Service):
// the registry and the lifecycle by session id, each session's handle for its turns (Session), the
// node's status, skills, and sessions moved in and out as archives. mcp and jupyter declare their
// own, smaller.
type Sessions interface {
	// The registry and what it holds of each session.
	Create(ctx context.Context, req session.CreateRequest) (carryover.Session, error)
	Get(id string) (carryover.Session, error)
	ListAll(ctx context.Context) ([]carryover.Session, error)
	Visible(id, tenant string) bool
	Reattach(ctx context.Context, clientID string) (carryover.Session, error)
	Delete(ctx context.Context, id string) error
	ForkMany(ctx context.Context, id string, req session.ForkRequest) ([]carryover.Session, error)
	// Session is the handle of session id: its turns (Run, RunCommand, Complete, RunNotebook), its
	// stream (Attach, SubscribeEvents), its kernel (Interrupt, Restart, Rotate, Hibernate) and
	// its checkpoints (CheckpointNow, RestoreCheckpoint, CheckpointDetail), its variables.
	Session(id string) (*session.Session, error)
	Files(id string) (workspace.Dir, error)

	// The lifecycle.
	Start(ctx context.Context, id string) (carryover.Session, error)
	Pause(ctx context.Context, id string) (carryover.Session, error)
	Resume(ctx context.Context, id string) (carryover.Session, error)
	Heartbeat(ctx context.Context, id string) (carryover.Session, error)
	Stop(ctx context.Context, id, reason string) (carryover.Session, error)
	Cancel(ctx context.Context, id, reason string) (carryover.Session, error)
	Patch(ctx context.Context, id string, data map[string]any) (carryover.Session, error)
	PatchContext(ctx context.Context, id string, req session.ContextRequest) (carryover.Session, error)

	// The session's records.
	Events(ctx context.Context, id string, q carryover.EventQuery) ([]carryover.Event, error)
	Executions(ctx context.Context, id string, limit int) ([]carryover.Execution, error)
	Tools(ctx context.Context, id string) ([]carryover.Tool, error)
	RegisterTool(ctx context.Context, id string, t carryover.Tool) (carryover.Tool, error)
	Checkpoints(ctx context.Context, id string) ([]carryover.CheckpointSummary, error)
	Usage(ctx context.Context, id string) (carryover.Usage, error)
	Notebook(ctx context.Context, id string) ([]byte, error)

	// A cell in a throwaway session (POST /api/execute).
	RunEphemeral(ctx context.Context, req session.EphemeralRequest) (*session.RunResult, error)
	RunEphemeralKeyed(ctx context.Context, key string, req session.EphemeralRequest) (res *session.RunResult, replayed bool, err error)

	// Archives, skills, the node.
	ExportSource(ctx context.Context, id, checkpointID string) (archive.Export, error)
	Import(ctx context.Context, r io.Reader, req session.ImportRequest) (session.ImportResult, error)
	Skills() skills.API
	Status() nodewatch.NodeStatus
}

var _ Sessions = (*session.Service)(nil)

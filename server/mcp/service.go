package mcp

import (
	"context"
	"io"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/persistence/archive"
	"github.com/carryover/carryover/server/session"
	"github.com/carryover/carryover/server/session/workspace"
)

// Sessions is what the MCP front door asks of the session service (*session.Service): one tool per
// call.
type Sessions interface {
	Create(ctx context.Context, req session.CreateRequest) (carryover.Session, error)
	Fork(ctx context.Context, id string, req session.ForkRequest) (carryover.Session, error)
	ForkMany(ctx context.Context, id string, req session.ForkRequest) ([]carryover.Session, error)
	Visible(id, tenant string) bool
	// Session is the handle of session id: its turns (Run, RunCommand) and RestoreCheckpoint.
	Session(id string) (*session.Session, error)
	Checkpoints(ctx context.Context, id string) ([]carryover.CheckpointSummary, error)
	Files(id string) (workspace.Dir, error)
	// Events is session id's event log (export_session with events).
	Events(ctx context.Context, id string, q carryover.EventQuery) ([]carryover.Event, error)
	ExportSource(ctx context.Context, id, checkpointID string) (archive.Export, error)
	Import(ctx context.Context, r io.Reader, req session.ImportRequest) (session.ImportResult, error)
}

var _ Sessions = (*session.Service)(nil)

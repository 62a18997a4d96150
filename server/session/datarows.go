package session

// datarows.go: the data viewer's pages, from the session's live kernel when it is idle
// (agentops.Rows pages the frame inside the kernel).

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/agentops"
)

// VariableRows answers one page of variable name of the session from its live kernel. It runs no
// turn (the execution count does not move) and starts no kernel: without one, or while a cell runs,
// it is a conflict that says so.
func (ls *Session) VariableRows(ctx context.Context, name string, q agentops.RowsQuery) (*agentops.RowsPage, error) {
	if err := agentops.CheckRows(name, q); err != nil {
		return nil, err
	}
	k := ls.currentKernel()
	if k == nil {
		return nil, carryover.Errorf(carryover.CodeConflict,
			"session %q has no running kernel (it sleeps or has not run yet): run a cell, then open the data viewer again", ls.id)
	}
	if !ls.lock.TryLock() {
		return nil, carryover.Errorf(carryover.CodeConflict, "the kernel is busy with a cell: open the data viewer when it is done")
	}
	defer ls.lock.Unlock()
	return agentops.Rows(ctx, k, name, q)
}

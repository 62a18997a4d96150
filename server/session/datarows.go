package session

// datarows.go: the data viewer's pages, from the session's live kernel when it is idle
// (agentops.Rows pages the frame inside the kernel).

import (
	"context"
	"time"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/agentops"
)

// rowsWait is how long a page waits for the kernel: the lock is also held for moments after a cell
// (its checkpoint, a variables probe, a widget save), and a viewer clicked then must not fail; a
// cell that runs longer is a conflict.
const rowsWait = 3 * time.Second

// VariableRows answers one page of variable name of the session from its live kernel. It runs no
// turn (the execution count does not move) and starts no kernel: without one, or while a cell runs
// (past rowsWait), it is a conflict that says so.
func (ls *Session) VariableRows(ctx context.Context, name string, q agentops.RowsQuery) (*agentops.RowsPage, error) {
	if err := agentops.CheckRows(name, q); err != nil {
		return nil, err
	}
	k := ls.currentKernel()
	if k == nil {
		return nil, carryover.Errorf(carryover.CodeConflict,
			"session %q has no running kernel (it sleeps or has not run yet): run a cell, then open the data viewer again", ls.id)
	}
	wctx, cancel := context.WithTimeout(ctx, rowsWait)
	defer cancel()
	if err := ls.lock.Lock(wctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, carryover.Errorf(carryover.CodeConflict, "the kernel is busy with a cell: open the data viewer when it is done")
	}
	defer ls.lock.Unlock()
	return agentops.Rows(ctx, k, name, q)
}

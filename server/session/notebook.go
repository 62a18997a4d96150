package session

import (
	"context"

	"github.com/carryover/carryover"
	"github.com/carryover/carryover/server/session/nbformat"
)

// Notebook is the session's history as an nbformat 4.5 notebook (nbformat.FromHistory).
func (s *Service) Notebook(ctx context.Context, id string) ([]byte, error) {
	if _, err := s.Session(id); err != nil {
		return nil, err
	}
	exs, err := s.store.ListExecutions(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	return nbformat.FromHistory(id, exs)
}

// NotebookRun is the answer of running a notebook's code cells into a session: each cell's run
// answer (or why it did not run), in order.
type NotebookRun struct {
	Cells     []NotebookCellRun `json:"cells"`
	Ran       int               `json:"ran"`                  // cells that ran
	StoppedAt *int              `json:"stopped_at,omitempty"` // the index of the cell that stopped the run
}

// NotebookCellRun is one code cell's outcome; Index is its place among the notebook's cells.
type NotebookCellRun struct {
	Index  int              `json:"index"`
	Result *RunResult       `json:"result,omitempty"`
	Error  *carryover.Error `json:"error,omitempty"`
}

// RunNotebook runs the code cells of an nbformat 4 notebook into the session, in order, as turns
// of their own (each checkpointed like any run). It stops at the first cell that raises or fails,
// unless keepGoing; a refusal (paused, closed, over budget) always stops it.
func (ls *Session) RunNotebook(ctx context.Context, raw []byte, keepGoing bool) (*NotebookRun, error) {
	sources, err := nbformat.CodeCells(raw)
	if err != nil {
		return nil, err
	}
	out := &NotebookRun{Cells: []NotebookCellRun{}}
	for _, c := range sources {
		res, err := ls.Run(ctx, RunRequest{Code: c.Code}, RunOptions{})
		cr := NotebookCellRun{Index: c.Index, Result: res}
		if err != nil {
			cr.Error = carryover.ErrorOf(err)
		}
		out.Cells = append(out.Cells, cr)
		if res != nil {
			out.Ran++
		}
		failed := err != nil || (res != nil && res.Status != "ok")
		if failed && (!keepGoing || res == nil) {
			i := c.Index
			out.StoppedAt = &i
			break
		}
	}
	return out, nil
}

package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/carryover/carryover"
)

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

// nbDocument is what RunNotebook reads of an .ipynb: its format and its cells' kind and source.
type nbDocument struct {
	NBFormat int `json:"nbformat"`
	Cells    []struct {
		CellType string          `json:"cell_type"`
		Source   json.RawMessage `json:"source"`
	} `json:"cells"`
}

// RunNotebook runs the code cells of an nbformat 4 notebook into the session, in order, as turns
// of their own (each checkpointed like any run). It stops at the first cell that raises or fails,
// unless keepGoing; a refusal (paused, closed, over budget) always stops it.
func (s *Service) RunNotebook(ctx context.Context, id string, raw []byte, keepGoing bool) (*NotebookRun, error) {
	if _, err := s.get(id); err != nil {
		return nil, err
	}
	sources, err := notebookSources(raw)
	if err != nil {
		return nil, err
	}
	out := &NotebookRun{Cells: []NotebookCellRun{}}
	for _, c := range sources {
		res, err := s.Run(ctx, id, RunRequest{Code: c.code}, RunOptions{})
		cr := NotebookCellRun{Index: c.index, Result: res}
		if err != nil {
			cr.Error = carryover.ErrorOf(err)
		}
		out.Cells = append(out.Cells, cr)
		if res != nil {
			out.Ran++
		}
		failed := err != nil || (res != nil && res.Status != "ok")
		if failed && (!keepGoing || res == nil) {
			i := c.index
			out.StoppedAt = &i
			break
		}
	}
	return out, nil
}

type nbSource struct {
	index int
	code  string
}

// notebookSources returns the non-empty code cells of an nbformat 4 notebook.
func notebookSources(raw []byte) ([]nbSource, error) {
	var nb nbDocument
	if err := json.Unmarshal(raw, &nb); err != nil {
		return nil, carryover.Errorf(carryover.CodeInvalid, "not a notebook: %v", err)
	}
	if nb.NBFormat != 4 {
		return nil, carryover.Errorf(carryover.CodeInvalid, "nbformat %d is not supported; want 4", nb.NBFormat).WithDetails("field", "nbformat")
	}
	var out []nbSource
	for i, c := range nb.Cells {
		if c.CellType != "code" {
			continue
		}
		code, err := cellSource(c.Source)
		if err != nil {
			return nil, carryover.Errorf(carryover.CodeInvalid, "cell %d: %v", i, err).WithDetails("field", "cells")
		}
		if strings.TrimSpace(code) != "" {
			out = append(out, nbSource{index: i, code: code})
		}
	}
	return out, nil
}

// cellSource reads a cell's source: a string, or a list of strings (lines) as nbformat allows.
func cellSource(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return "", errors.New("source must be a string or a list of strings")
	}
	return strings.Join(lines, ""), nil
}

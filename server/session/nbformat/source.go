package nbformat

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/carryover/carryover"
)

// document is what CodeCells reads of an .ipynb: its format and its cells' kind and source.
type document struct {
	NBFormat int `json:"nbformat"`
	Cells    []struct {
		CellType string          `json:"cell_type"`
		Source   json.RawMessage `json:"source"`
	} `json:"cells"`
}

// Source is a code cell to run: its place among the notebook's cells and its code.
type Source struct {
	Index int
	Code  string
}

// CodeCells returns the non-empty code cells of an nbformat 4 notebook, in order. A document that
// is not one is an invalid_request.
func CodeCells(raw []byte) ([]Source, error) {
	var nb document
	if err := carryover.UnmarshalRequest(raw, &nb); err != nil {
		e := carryover.ErrorOf(err)
		out := carryover.Errorf(carryover.CodeInvalid, "not a notebook: %s", e.Message)
		if f, ok := e.Details["field"]; ok {
			out = out.WithDetails("field", f)
		}
		return nil, out
	}
	if nb.NBFormat != 4 {
		return nil, carryover.Errorf(carryover.CodeInvalid, "nbformat %d is not supported; want 4", nb.NBFormat).WithDetails("field", "nbformat")
	}
	var out []Source
	for i, c := range nb.Cells {
		if c.CellType != "code" {
			continue
		}
		code, err := cellSource(c.Source)
		if err != nil {
			return nil, carryover.Errorf(carryover.CodeInvalid, "cell %d: %v", i, err).WithDetails("field", "cells")
		}
		if strings.TrimSpace(code) != "" {
			out = append(out, Source{Index: i, Code: code})
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
